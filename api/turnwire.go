package api

import "sync"

// The native turn's wire, by hand. POST /v1/sessions/{sid}/turns is the
// hottest route, and encoding/json's reflection and allocations for its
// request and response were some 8% of the server's CPU under load, and
// much of its garbage. The two functions here stand in for the
// encoding/json paths in wire.go without changing a byte:
//
//   - writeTurnJSON answers what writeJSON(w, status, toTurnWire(t)) would;
//   - decodeTurnRequest decodes what decodeJSON(r, &turnRequest{}) would,
//     with the same errors.
//
// Each takes a fast path only where it is sure of giving the same bytes or
// values, and otherwise declines to the encoding/json path, which stays
// the reference: turnwire_test.go compares the two on tables and fuzzed
// inputs.

//
// turnwire_response.go holds the writer, turnwire_request.go the scanner;
// both work on JSON text through internal/rawjson.

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
