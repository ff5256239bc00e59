package sqlite

import (
	"database/sql"
	"time"
)

// Times are INTEGER unix microseconds: they come back truncated to the
// microsecond and in UTC. A zero time.Time in a nullable column is NULL.

func micros(t time.Time) int64 { return t.UnixMicro() }

func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func fromNullMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

// nullText binds b to a TEXT column: the driver would bind []byte as a BLOB,
// which a STRICT TEXT column refuses. nil is NULL.
func nullText(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}
