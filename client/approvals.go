package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"time"
)

// Calls that wait for approval: the server's approval policy parks some
// calls before their tool runs (result status pending, a call_pending
// ledger line with reason "approval") until a person decides. A call can
// be decided through the API (Decide, with the bearer token) or through
// its completion key (DecideKey, with the key as the credential).

// The decisions a Decision sends.
const (
	Approve = "approve"
	Reject  = "reject"
)

// The decisions a DecisionResult and a call_decided line record.
const (
	Approved = "approved"
	Rejected = "rejected"
)

// The statuses of a DecisionResult.
const (
	DecisionAccepted = "accepted"
	AlreadyDecided   = "already_decided"
)

// The statuses of a call's Result. ResultPending is a call parked on a
// completion key or waiting for approval; ResultRejected a call whose
// approval was refused (its tool never ran).
const (
	ResultOK        = "ok"
	ResultError     = "error"
	ResultPending   = "pending"
	ResultRefused   = "refused"
	ResultCancelled = "cancelled"
	ResultTimedOut  = "timed_out"
	ResultRejected  = "rejected"
)

// The problem codes of a refused decision (Error.Code).
const (
	CodeNotAwaitingApproval = "not_awaiting_approval"
	CodeAlreadyDecided      = "already_decided"
	CodeApprovalExpired     = "approval_expired"
	CodeInvalidArguments    = "invalid_arguments"
)

// Approval is a call waiting for a person's decision. Arguments are the
// call's arguments as posted: model output, to be shown as text.
type Approval struct {
	SessionID   string          `json:"session_id"`
	TurnID      string          `json:"turn_id"`
	CallIndex   int             `json:"call_index"`
	CallID      string          `json:"call_id"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	RequestedAt time.Time       `json:"requested_at"`
	Deadline    *time.Time      `json:"deadline"`
	OnTimeout   string          `json:"on_timeout"`
	// Rule is why the policy asks for approval, e.g.
	// "tool delete_file: always".
	Rule string `json:"rule"`
}

// ApprovalPage is a page of calls waiting for approval, newest first.
type ApprovalPage struct {
	Approvals []Approval `json:"approvals"`
	NextAfter string     `json:"next_after"`
}

func (p *ApprovalPage) page() ([]Approval, string) { return p.Approvals, p.NextAfter }

// Decision approves or rejects a call waiting for approval. Arguments
// (Approve only, a JSON object) run the tool with edited arguments;
// Message (Reject) is what the model reads; By names who decided.
type Decision struct {
	Decision  string          `json:"decision"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Message   string          `json:"message,omitempty"`
	By        string          `json:"by,omitempty"`
}

// DecisionResult is the answer to a decision: Decision is approved or
// rejected, Status accepted or already_decided (the same decision had
// been taken), Edited whether the tool runs with edited arguments.
type DecisionResult struct {
	Decision  string `json:"decision"`
	Status    string `json:"status"`
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	CallID    string `json:"call_id"`
	Edited    bool   `json:"edited"`
}

// ApprovalsPage reads one page of the calls waiting for approval, across
// sessions, newest first.
func (c *Client) ApprovalsPage(ctx context.Context, opts ListOptions) (*ApprovalPage, error) {
	opts.Status = ""
	return callJSON[ApprovalPage](ctx, c, request{method: http.MethodGet, path: "/v1/approvals" + opts.query()})
}

// Approvals iterates over the calls waiting for approval, newest first,
// page by page.
func (c *Client) Approvals(ctx context.Context, opts ListOptions) iter.Seq2[Approval, error] {
	return pages(opts, func(o ListOptions) (*ApprovalPage, error) { return c.ApprovalsPage(ctx, o) })
}

// Decide approves or rejects a call waiting for approval. Deciding again
// the same way answers AlreadyDecided; the errors are *Error values with
// the codes above (409 when the call is not waiting for approval or was
// decided otherwise, 410 when its deadline passed or its turn was
// cancelled, 422 when edited arguments fail the tool's schema).
func (c *Client) Decide(ctx context.Context, sessionID, turnID, callID string, d Decision) (*DecisionResult, error) {
	body, err := jsonBody(d)
	if err != nil {
		return nil, err
	}
	return callJSON[DecisionResult](ctx, c, request{method: http.MethodPost, path: turnPath(sessionID, turnID) + "/calls/" + esc(callID) + "/decision", body: body})
}

// DecideKey posts a decision to the completion key of a call waiting for
// approval (bare or as its complete URL), with the answers of Decide. As
// with deliveries, the key is the credential: no bearer token is sent,
// and the request is signed when the client has a signing secret.
func (c *Client) DecideKey(ctx context.Context, key string, d Decision) (*DecisionResult, error) {
	body, err := jsonBody(d)
	if err != nil {
		return nil, err
	}
	return callJSON[DecisionResult](ctx, c, request{method: http.MethodPost, path: completePath(key), body: body, noAuth: true, sign: true})
}
