/** What `berth logs -s` calls the logs that are no service's: the project's setup, and the world's history. */
export const SETUP_LOG = "setup"
export const HISTORY_LOG = "berth"
