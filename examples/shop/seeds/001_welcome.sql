INSERT INTO orders (item) VALUES ('welcome kit');
