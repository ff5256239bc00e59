-- +goose Up
-- turnd schema, version 13 (PostgreSQL): calls parked for a person's
-- approval, and the sessions' approval policies.
--
-- completions.reason says why a call parked: '' for a tool's external work
-- (every key before this version), 'approval' for a call that waits for a
-- decision before its tool runs. An approved call's key is in the status
-- 'approved' while its tool runs; its payload is then the decision.
-- sessions.approval is the policy a session added at creation (JSON; NULL
-- for none). Constant defaults: adding the columns rewrites nothing, and
-- the previous release ignores them.
ALTER TABLE completions ADD COLUMN reason text NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN approval json;
CREATE INDEX completions_approvals ON completions (created_at, session_id, turn_id, call_idx)
    WHERE status = 'pending' AND reason = 'approval';

-- +goose Down
-- An approved key whose tool had not answered is left as it is: the
-- previous release neither runs nor expires it. Decide or cancel pending
-- approvals before going back.
DROP INDEX completions_approvals;
ALTER TABLE sessions DROP COLUMN approval;
ALTER TABLE completions DROP COLUMN reason;
