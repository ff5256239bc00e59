package turn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/turnd/turnd/completion"
)

// Webhooks: the transaction that settles a turn inserts its Webhook into an
// outbox, and a delivery loop in every replica sends it, at least once, as
// a Standard Webhooks message. See ARCHITECTURE.md, "Webhooks".

// EventTurnSettled is the type of the webhook sent when a turn settles.
const EventTurnSettled = "turn.settled"

// Webhook is one message of the webhook outbox.
type Webhook struct {
	// ID is the message's webhook-id ("msg_…"), the same on every attempt.
	ID        string
	SessionID string
	TurnID    string
	URL       string
	Event     string
	// Body is the payload exactly as signed and sent.
	Body json.RawMessage
	// Attempts counts the attempts started (claims), including any that a
	// crash cut short.
	Attempts int
	// NextAttemptAt is when the webhook is next due; while an attempt is in
	// flight, the end of its claim's lease.
	NextAttemptAt time.Time
	// LastError is the short status or network text of the latest failed
	// attempt (never a response body).
	LastError   string
	CreatedAt   time.Time
	DeliveredAt time.Time // zero until acknowledged
	DeadAt      time.Time // zero unless given up on
}

// WebhookOutcome is how a delivery attempt ended.
type WebhookOutcome string

const (
	// WebhookDelivered: the receiver answered 2xx.
	WebhookDelivered WebhookOutcome = "delivered"
	// WebhookRetry: the attempt failed; the webhook is due again at
	// WebhookMark.NextAttemptAt.
	WebhookRetry WebhookOutcome = "retry"
	// WebhookDead: the webhook is given up on (too old, or its URL unusable).
	WebhookDead WebhookOutcome = "dead"
)

// WebhookMark records the outcome of one delivery attempt.
type WebhookMark struct {
	Outcome WebhookOutcome
	// At is when the attempt ended: the webhook's DeliveredAt or DeadAt.
	At time.Time
	// NextAttemptAt is when a retried webhook is due again (WebhookRetry).
	NextAttemptAt time.Time
	// Error becomes LastError (WebhookRetry and WebhookDead; a delivery
	// keeps the LastError it had).
	Error string
}

// WebhookStore keeps the webhook outbox. It is part of Store. Webhooks are
// inserted only by Commit and Resolve, in the transaction that settles their
// turn.
type WebhookStore interface {
	// ClaimWebhooks takes up to limit open webhooks (neither delivered nor
	// dead) whose NextAttemptAt is at or before now, the earliest first:
	// it sets their NextAttemptAt to now+lease (the claim's lease), adds one
	// to their Attempts and returns them as updated, in no particular
	// order. Concurrent claimers, in this process or another, never get the
	// same webhook while its lease runs; once it has run out, the webhook is
	// due again.
	ClaimWebhooks(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Webhook, error)
	// MarkWebhook records the outcome of an attempt on webhook id of the
	// session (see
	// WebhookMark). A webhook already delivered or dead is left as it is,
	// without error: an attempt whose lease ran out may finish after
	// another claimer's. An unknown id is ErrNotFound.
	MarkWebhook(ctx context.Context, sessionID, id string, m WebhookMark) error
	// TurnWebhooks returns the webhooks of a turn, oldest first (an empty
	// slice for an unknown turn).
	TurnWebhooks(ctx context.Context, k TurnKey) ([]Webhook, error)
}

// settledWebhook returns the outbox row announcing that turn k settled
// with status at at, or nil when the session has no callback URL (then no
// row is written). The payload has the Standard Webhooks shape: type,
// timestamp (the event's time) and data.
func settledWebhook(callbackURL string, k TurnKey, status Status, at time.Time) *Webhook {
	if callbackURL == "" {
		return nil
	}
	type data struct {
		SessionID string    `json:"session_id"`
		TurnID    string    `json:"turn_id"`
		Status    Status    `json:"status"`
		SettledAt time.Time `json:"settled_at"`
	}
	return newWebhook(k, callbackURL, EventTurnSettled, at, data{k.SessionID, k.TurnID, status, at.UTC()})
}

// newWebhook is a webhook of turn k to url, due at at: its body is the
// Standard Webhooks envelope {"type": event, "timestamp": at, "data": data}.
func newWebhook(k TurnKey, url, event string, at time.Time, data any) *Webhook {
	body := mustJSON(struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      any       `json:"data"`
	}{event, at.UTC(), data})
	return &Webhook{
		ID:            completion.NewMessageID(),
		SessionID:     k.SessionID,
		TurnID:        k.TurnID,
		URL:           url,
		Event:         event,
		Body:          body,
		NextAttemptAt: at,
		CreatedAt:     at,
	}
}

// callbackURL returns the callback URL of a session, for the settlements
// that do not have the session at hand.
func (s *Service) callbackURL(ctx context.Context, sessionID string) (string, error) {
	sess, err := s.store.GetSession(ctx, sessionID)
	if err != nil {
		return "", fmt.Errorf("reading session: %w", err)
	}
	return sess.CallbackURL, nil
}

// maxCallbackURL is the longest callback URL a session may have.
const maxCallbackURL = 2048

// checkCallbackURL accepts an absolute http or https URL with a host and
// without user information: credentials in a URL end up in logs and
// proxies; receivers authenticate turnd by the webhook signature instead.
func checkCallbackURL(raw string) error {
	if len(raw) > maxCallbackURL {
		return fmt.Errorf("longer than %d bytes", maxCallbackURL)
	}
	if !utf8.ValidString(raw) {
		return errors.New("not valid UTF-8")
	}
	if !utf8.ValidString(raw) {
		return errors.New("not valid UTF-8")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a valid URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must be an absolute http or https URL")
	case u.Opaque != "" || u.Hostname() == "":
		return errors.New("must be an absolute http or https URL with a host")
	case u.User != nil:
		return errors.New("must not contain user information (user:password@)")
	}
	return nil
}

// Webhook delivery defaults (see Config).
const (
	defaultWebhookTimeout     = 10 * time.Second
	defaultWebhookBackoff     = time.Second
	defaultWebhookMaxBackoff  = time.Hour
	defaultWebhookMaxAge      = 72 * time.Hour
	defaultWebhookConcurrency = 16
	// markTimeout bounds recording an attempt's outcome; it runs on a
	// context of its own so that a shutdown still records what it
	// interrupted.
	markTimeout = 10 * time.Second
	// maxLastError bounds the error text kept with a webhook.
	maxLastError = 200
)

// webhookLease is how long a claim holds a webhook: well beyond one attempt
// (so that an attempt in flight is never claimed twice), short enough that
// an attempt a crash cut short is retried soon.
func (s *Service) webhookLease() time.Duration { return 3 * s.cfg.WebhookTimeout }

// wakeWebhooks makes the delivery loop look for due webhooks now (after a
// settlement here wrote one); it never blocks.
func (s *Service) wakeWebhooks() {
	select {
	case s.hookWake <- struct{}{}:
	default:
	}
}

// webhookLoop delivers due webhooks: at start (what a previous process left
// undelivered), every Config.WebhookInterval, when a settlement here wrote
// one, and when a delivery finishes and frees a slot. Up to
// Config.WebhookConcurrency attempts run at once. On stop it stops
// claiming and waits for the attempts in flight, which Shutdown cancels
// when its grace period ends.
func (s *Service) webhookLoop() {
	defer s.loops.Done()
	var inflight sync.WaitGroup
	defer inflight.Wait()
	slots := make(chan struct{}, s.cfg.WebhookConcurrency)
	t := time.NewTicker(s.cfg.WebhookInterval)
	defer t.Stop()
	for {
		if free := cap(slots) - len(slots); free > 0 {
			for _, w := range s.claimWebhooks(free) {
				slots <- struct{}{}
				inflight.Go(func() {
					defer func() {
						<-slots
						s.wakeWebhooks() // a slot is free: more may be due
					}()
					s.deliverWebhook(w)
				})
			}
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.hookWake:
		}
	}
}

func (s *Service) claimWebhooks(limit int) []Webhook {
	ctx, cancel := context.WithTimeout(s.hookCtx, 30*time.Second)
	defer cancel()
	hooks, err := s.store.ClaimWebhooks(ctx, s.now(), s.webhookLease(), limit)
	if err != nil {
		if s.hookCtx.Err() == nil {
			s.log.Warn("claiming webhooks failed", "err", err)
		}
		return nil
	}
	return hooks
}

// attempt is what one POST of a webhook came to.
type attempt struct {
	status     int           // the response status; 0 without a response
	retryAfter time.Duration // the response's Retry-After
	err        error         // no response (or an unusable URL: permanent)
	permanent  bool
}

// deliverWebhook makes one attempt and records its outcome.
func (s *Service) deliverWebhook(w Webhook) {
	a := s.post(w)
	now := s.now()
	m := WebhookMark{At: now}
	log := s.log.With("webhook_id", w.ID, "session_id", w.SessionID, "turn_id", w.TurnID, "host", urlHost(w.URL), "attempt", w.Attempts)
	switch {
	case a.err == nil && a.status >= 200 && a.status < 300:
		m.Outcome = WebhookDelivered
	case s.hookCtx.Err() != nil:
		// Shutdown cut the attempt short: due again at once, for a replica
		// or the next start. The receiver may have had it: at least once.
		m.Outcome, m.NextAttemptAt, m.Error = WebhookRetry, now, "attempt interrupted by shutdown"
	default:
		m.Error = attemptError(a, s.cfg.WebhookTimeout)
		if a.permanent || now.Sub(w.CreatedAt) >= s.cfg.WebhookMaxAge {
			m.Outcome = WebhookDead
			log.Error("webhook given up", "age", now.Sub(w.CreatedAt).Round(time.Second), "err", m.Error)
			break
		}
		wait := max(webhookBackoff(w.Attempts, s.cfg.WebhookBackoff, s.cfg.WebhookMaxBackoff), a.retryAfter)
		m.Outcome, m.NextAttemptAt = WebhookRetry, now.Add(min(wait, s.cfg.WebhookMaxBackoff))
		log.Warn("webhook attempt failed; retrying", "retry_in", m.NextAttemptAt.Sub(now), "err", m.Error)
	}
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	if err := s.store.MarkWebhook(ctx, w.SessionID, w.ID, m); err != nil {
		// The claim's lease runs out and the webhook is sent again.
		log.Error("recording a webhook attempt failed; it will be retried when its lease expires", "outcome", m.Outcome, "err", err)
		return
	}
	s.cfg.Observer.WebhookAttempt(m.Outcome)
}

// post sends w once, signed when there is a signer.
func (s *Service) post(w Webhook) attempt {
	if err := checkCallbackURL(w.URL); err != nil {
		return attempt{err: fmt.Errorf("callback URL %w", err), permanent: true}
	}
	if u, err := url.Parse(w.URL); err == nil {
		if _, err := s.cfg.CallbackPolicy.checkLiteral(u.Hostname()); err != nil {
			return attempt{err: err, permanent: true}
		}
	}
	ctx, cancel := context.WithTimeout(s.hookCtx, s.cfg.WebhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(w.Body))
	if err != nil {
		return attempt{err: errors.New("callback URL not usable"), permanent: true}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "turnd")
	sent := s.cfg.Now()
	if s.cfg.WebhookSigner != nil {
		for k, v := range s.cfg.WebhookSigner.Headers(w.ID, sent, w.Body) {
			req.Header.Set(k, v)
		}
	} else {
		req.Header.Set(completion.HeaderID, w.ID)
		req.Header.Set(completion.HeaderTimestamp, strconv.FormatInt(sent.Unix(), 10))
	}
	traced := s.traceWebhook(req, w)
	resp, err := s.cfg.WebhookClient.Do(req)
	if err != nil {
		traced(attempt{err: err})
		// A blocked address is refused for good, whatever the name
		// resolves to next time.
		return attempt{err: err, permanent: errors.Is(err, ErrCallbackBlocked)}
	}
	// Drain a little so that the connection is reused; never keep the body.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	traced(attempt{status: resp.StatusCode})
	return attempt{status: resp.StatusCode, retryAfter: retryAfter(resp.Header.Get("Retry-After"), s.cfg.Now(), s.cfg.WebhookMaxBackoff)}
}

// attemptError is the short text kept as a failed attempt's LastError: the
// status, or the network error without the URL (which may carry a token in
// its query).
func attemptError(a attempt, timeout time.Duration) string {
	var msg string
	switch {
	case a.err == nil:
		msg = fmt.Sprintf("HTTP %d %s", a.status, http.StatusText(a.status))
		if a.status >= 300 && a.status < 400 {
			msg += " (redirects are not followed)"
		}
	case errors.Is(a.err, context.DeadlineExceeded):
		msg = fmt.Sprintf("no response within %v", timeout)
	default:
		err := a.err
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		msg = err.Error()
	}
	if len(msg) > maxLastError {
		msg = strings.ToValidUTF8(msg[:maxLastError], "")
	}
	return msg
}

// webhookBackoff is the wait after failed attempt n (1 for the first):
// base doubling per attempt, at most ceiling, drawn uniformly from its upper
// half so that webhooks failing together do not retry in lockstep.
func webhookBackoff(n int, base, ceiling time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	return d/2 + rand.N(d/2+1)
}

// retryAfter parses a Retry-After header (delay seconds or an HTTP date)
// into a wait from now, capped at ceiling; 0 when absent or unusable.
func retryAfter(h string, now time.Time, ceiling time.Duration) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(h, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs >= int64(ceiling/time.Second) {
			return ceiling
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return min(max(t.Sub(now), 0), ceiling)
	}
	return 0
}

// urlHost is the host of a callback URL, for logs: the path and query may
// carry a token.
func urlHost(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Host
	}
	return ""
}
