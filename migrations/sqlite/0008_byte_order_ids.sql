-- +goose Up
-- turnd schema, version 8 (SQLite): ids compare as bytes.
--
-- The PostgreSQL migration of this version declares the id columns
-- COLLATE "C". SQLite's TEXT columns compare with BINARY unless declared
-- otherwise, which is already byte order: nothing to change. The version
-- exists so that both stores count the same versions.
SELECT 1;

-- +goose Down
SELECT 1;
