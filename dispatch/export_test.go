package dispatch

// LimitSetKeys reports how many keys of s have a queue.
func LimitSetKeys(s *LimitSet) int { return s.keys() }
