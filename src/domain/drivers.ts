/**
 * The clients three adapters talk to their servers with are not installed with berth: each is several MiB, for the
 * few projects with such a slice. The user adds the one a slice needs beside berth, in the version berth is tested
 * with; until then a slice of that family fails with `DriverMissing`, naming the command.
 */
export interface Driver {
  /** the adapter family it serves (`src/domain/adapters.ts`): minio uses s3's, redpanda kafka's */
  readonly family: string
  readonly packageName: string
  /** as package.json's devDependencies pin it (a unit test keeps them one) */
  readonly version: string
}

export const drivers: ReadonlyMap<string, Driver> = new Map(
  [
    { family: "s3", packageName: "@aws-sdk/client-s3", version: "3.1175.0" },
    { family: "mongodb", packageName: "mongodb", version: "7.9.1" },
    { family: "kafka", packageName: "kafkajs", version: "2.2.4" }
  ].map((d) => [d.family, d])
)

/** What installs it beside a global berth (where berth's own require finds it: the same node_modules). */
export const installCommand = (driver: Driver): string => `npm i -g ${driver.packageName}@${driver.version}`
