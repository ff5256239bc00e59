package completion

import "time"

// TimeoutAt is when the call times out if nothing else happens: the earlier
// of Deadline and HeartbeatDeadline (when set), as the stores' expiry
// queries order completions.
func (r Resolved) TimeoutAt() time.Time {
	if !r.HeartbeatDeadline.IsZero() && r.HeartbeatDeadline.Before(r.Deadline) {
		return r.HeartbeatDeadline
	}
	return r.Deadline
}
