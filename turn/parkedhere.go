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
// most twice as many are held, about 1 KiB each (sessions are shared with
// the runs and the session cache).
const parkedHereMax = 16384

// parkedHere holds the DeliveryTargets of keys parked here, in two
// generations: when the newer is full it becomes the older, and the older
// is dropped, so that keys delivered elsewhere or never are forgotten.
type parkedHere struct {
	mu       sync.Mutex
	cur, old map[[32]byte]parkedKey
}

// parkedKey is what parkedHere keeps of a key: its target, and its
// session (sessions never change), which a delivery would otherwise read
// again once the session cache no longer holds it.
type parkedKey struct {
	target  DeliveryTarget
	session *Session
}

// put keeps k under its key hash.
func (p *parkedHere) put(k parkedKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		p.cur = make(map[[32]byte]parkedKey)
	}
	if len(p.cur) >= parkedHereMax {
		p.old, p.cur = p.cur, make(map[[32]byte]parkedKey)
	}
	p.cur[k.target.KeyHash] = k
}

// take returns and forgets what is kept for h.
func (p *parkedHere) take(h [32]byte) (parkedKey, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k, ok := p.cur[h]; ok {
		delete(p.cur, h)
		return k, true
	}
	if k, ok := p.old[h]; ok {
		delete(p.old, h)
		return k, true
	}
	return parkedKey{}, false
}

// keepParked keeps the targets of the keys r parked in t, its turn read
// back once it was left waiting. A resumed run keeps none: an attempt
// before it may have issued its keys, under another configuration (a key
// issued waiting for approval keeps that reason), and what the delivery
// checks of the key would then not be what the store holds.
func (r *run) keepParked(t Turn) {
	if r.resumed {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sess := r.session // a copy: the entries do not hold the run
	for _, c := range r.keyed {
		if c.Reason != "" {
			continue
		}
		c.Status = CompletionPending
		d := targetOf(t, c)
		if d.Recorded && d.Result.Status == CallPending {
			r.svc.parked.put(parkedKey{target: d, session: &sess})
		}
	}
}
