package api

import "sync"

// The native turn's wire, by hand: writeTurnJSON (turnwire_response.go)
// answers the bytes writeJSON(w, status, toTurnWire(t)) would, and
// decodeTurnRequest (turnwire_request.go) decodes what decodeJSON would,
// errors included. Each declines to the encoding/json path where it is not
// sure; turnwire_test.go holds the two to it (ARCHITECTURE.md, "JSON text").

// maxPooledBuffer bounds the buffers kept for reuse, so that one large
// turn does not pin its buffer for the rest of the process.
const maxPooledBuffer = 64 << 10

var wireBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func putWireBuffer(p *[]byte, b []byte) {
	if cap(b) > maxPooledBuffer {
		return
	}
	*p = b[:0]
	wireBuffers.Put(p)
}
