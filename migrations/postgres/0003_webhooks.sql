-- +goose Up
-- turnd schema, version 3 (PostgreSQL): the webhook outbox.
--
-- When a turn of a session with a callback_url settles, the transaction that
-- settles it also inserts one row here: a Standard Webhooks message
-- (turn.settled) to POST to that URL. A delivery loop in every replica
-- claims due rows, posts them and records the outcome, retrying with backoff
-- until the receiver acknowledges (2xx) or the message is too old (dead).
-- Because the row commits with the settlement, no settled turn loses its
-- webhook to a crash; because a claim only moves next_attempt_at forward (a
-- lease), a delivery cut short by a crash or a shutdown becomes due again.
--
-- id is the message's webhook-id ("msg_…"): the same on every attempt, so
-- receivers can drop duplicates (delivery is at least once). body is the
-- payload exactly as signed and sent, kept as json (byte for byte).
CREATE TABLE webhooks (
    id              text        PRIMARY KEY,
    session_id      text        NOT NULL,
    turn_id         text        NOT NULL,
    url             text        NOT NULL,
    event           text        NOT NULL,
    body            json        NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0,   -- attempts started (claims)
    next_attempt_at timestamptz NOT NULL,             -- due from; a claim's lease until
    last_error      text        NOT NULL DEFAULT '',  -- short status or network text, never a body
    created_at      timestamptz NOT NULL,
    delivered_at    timestamptz,                      -- acknowledged with a 2xx
    dead_at         timestamptz,                      -- given up on
    FOREIGN KEY (session_id, turn_id) REFERENCES turns (session_id, id) ON DELETE CASCADE
);

-- The delivery loop looks for open rows (neither delivered nor dead) that
-- are due, earliest first. The index holds only open rows, the few that
-- still need work; next_attempt_at changes on every claim, but only while a
-- row is open.
CREATE INDEX webhooks_due ON webhooks (next_attempt_at) WHERE delivered_at IS NULL AND dead_at IS NULL;

-- +goose Down
DROP TABLE webhooks;
