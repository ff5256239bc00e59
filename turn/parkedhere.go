package turn

import "sync"

// What a delivery needs to know of a key parked here. A run that leaves
// its turn waiting has just read the turn back (settled); for each call it
// parked on a key of its own issuing (not one waiting for approval), that
// read is the DeliveryTarget that GetDelivery would return for the key, and
// it stays that until a delivery, a timeout or a cancel resolves the key:
// a waiting turn holds no lease, so nothing runs its calls again. A
// delivery to this process takes it (Complete) instead of reading it. The
// resolving write still checks the key's status under its lock, so a key
// that was resolved meanwhile (elsewhere, or timed out) is read then and
// answered as it is (ARCHITECTURE.md, "Deliveries").

// parkedHereMax is the most keys one generation of parkedHere holds: at
// most twice as many are held, about 1 KiB each.
const parkedHereMax = 16384

// parkedHere holds the DeliveryTargets of keys parked here, in two
// generations: when the newer is full it becomes the older, and the older
// is dropped, so that keys delivered elsewhere or never are forgotten.
type parkedHere struct {
	mu       sync.Mutex
	cur, old map[[32]byte]DeliveryTarget
}

// put keeps d under its key hash.
func (p *parkedHere) put(d DeliveryTarget) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		p.cur = make(map[[32]byte]DeliveryTarget)
	}
	if len(p.cur) >= parkedHereMax {
		p.old, p.cur = p.cur, make(map[[32]byte]DeliveryTarget)
	}
	p.cur[d.KeyHash] = d
}

// take returns and forgets the target kept for h.
func (p *parkedHere) take(h [32]byte) (DeliveryTarget, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d, ok := p.cur[h]; ok {
		delete(p.cur, h)
		return d, true
	}
	if d, ok := p.old[h]; ok {
		delete(p.old, h)
		return d, true
	}
	return DeliveryTarget{}, false
}

// keepParked keeps the targets of the keys r parked in t, its turn read
// back once it was left waiting.
func (r *run) keepParked(t Turn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for idx, h := range r.keyed {
		if idx < 0 || idx >= len(t.Calls) || r.keyReason(t.Calls[idx].ID) != "" {
			continue
		}
		c := Completion{KeyHash: h, SessionID: t.SessionID, TurnID: t.ID, CallIndex: idx,
			CallID: t.Calls[idx].ID, CallName: t.Calls[idx].Name, Status: CompletionPending}
		d := targetOf(t, c)
		if d.Recorded && d.Result.Status == CallPending {
			r.svc.parked.put(d)
		}
	}
}
