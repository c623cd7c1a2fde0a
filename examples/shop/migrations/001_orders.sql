CREATE TABLE orders (
  id serial PRIMARY KEY,
  item text NOT NULL,
  placed_at timestamptz NOT NULL DEFAULT now()
);
