package budget

import (
	"bytes"
	"fmt"
	"io"
)

// Stream is an io.Writer that projects everything written to it, holding
// only the first and last Limit+1 bytes (in bytes mode; 4*Limit+1 in tokens
// mode) however much is written. Result returns exactly what
// [Projector.Project] returns for the concatenation of all writes.
//
// A Stream lets a caller copy a body into its own spool and into the
// projection at once, e.g. io.Copy(io.MultiWriter(spool, s), body).
// Create one with [Projector.NewStream]; a Stream is not safe for concurrent
// use.
type Stream struct {
	projector *Projector
	head      []byte // the first edgeBytes() bytes
	tail      ring   // the last edgeBytes() bytes
	size      int64
	newlines  int64
	errors    *collector // WindowErrors only
}

// NewStream returns an empty Stream projecting with p.
func (p *Projector) NewStream() *Stream {
	s := &Stream{projector: p, tail: ring{limit: p.edgeBytes()}}
	if p.matcher != nil {
		s.errors = p.newCollector()
	}
	return s
}

// Write adds b to the stream. It never fails.
func (s *Stream) Write(b []byte) (int, error) {
	s.size += int64(len(b))
	n := int64(bytes.Count(b, newline))
	s.newlines += n
	if s.errors != nil {
		s.errors.write(b)
	}
	if room := s.projector.edgeBytes() - len(s.head); room > 0 {
		s.head = appendWithin(s.head, b[:min(room, len(b))], s.projector.edgeBytes())
	}
	s.tail.write(b)
	return len(b), nil
}

// Result projects what has been written so far. Writing may go on after it.
func (s *Stream) Result() Result {
	return s.ResultWithin(s.projector.config.Limit)
}

// ResultWithin is Result with the Limit lowered to limit (see
// [Projector.Within]): exactly what Within(limit).Project returns for the
// same bytes, since a smaller window is within what the stream holds.
func (s *Stream) ResultWithin(limit int) Result {
	p := s.projector.Within(limit)
	suffix := s.tail.bytes()
	w := min(len(s.head), p.edgeBytes())
	v := view{
		prefix:   s.head[:w],
		suffix:   suffix[len(suffix)-w:],
		size:     s.size,
		newlines: s.newlines,
	}
	if s.errors != nil {
		v.errors = s.errors.lines()
	}
	return p.project(v)
}

// ProjectReader projects everything r yields, in memory bounded by the caps
// rather than by the input. On a read error it returns the projection of
// what was read before the error, and the error.
func (p *Projector) ProjectReader(r io.Reader) (Result, error) {
	s := p.NewStream()
	if _, err := io.Copy(s, r); err != nil {
		return s.Result(), fmt.Errorf("budget: read: %w", err)
	}
	return s.Result(), nil
}

// ring keeps the last limit bytes written to it.
type ring struct {
	limit int
	buf   []byte // grows up to limit, then wraps
	next  int    // where the next byte goes once buf is full; the oldest byte
}

func (r *ring) write(b []byte) {
	if len(b) >= r.limit {
		if len(r.buf) < r.limit {
			r.buf = make([]byte, r.limit)
		}
		copy(r.buf, b[len(b)-r.limit:])
		r.next = 0
		return
	}
	if room := r.limit - len(r.buf); room > 0 {
		n := min(room, len(b))
		r.buf = appendWithin(r.buf, b[:n], r.limit)
		b = b[n:]
	}
	n := copy(r.buf[r.next:], b)
	r.next += n
	if n < len(b) {
		r.next = copy(r.buf, b[n:])
	}
	if r.next == r.limit {
		r.next = 0
	}
}

// bytes returns the kept bytes in order, copying only when they wrap.
func (r *ring) bytes() []byte {
	if r.next == 0 {
		return r.buf
	}
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// appendWithin appends src to dst, growing dst's capacity no further than
// limit so that buffers stay bounded by the caps.
func appendWithin(dst, src []byte, limit int) []byte {
	if need := len(dst) + len(src); need > cap(dst) {
		grown := make([]byte, len(dst), min(limit, max(need, 2*cap(dst), 512)))
		copy(grown, dst)
		dst = grown
	}
	return append(dst, src...)
}
