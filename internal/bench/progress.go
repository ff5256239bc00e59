package bench

import (
	"fmt"
	"io"
	"strings"
)

// progressPrinter returns the progress callback c asks for, writing to w:
// a bar redrawn in place ("bar", for a terminal), a line per report
// ("lines"), or nil ("none").
func progressPrinter(c Config, w io.Writer) func(Snapshot) {
	switch c.Progress {
	case "bar":
		return func(s Snapshot) {
			const width = 30
			n := int(s.Fraction * width)
			fmt.Fprintf(w, "\r\x1b[K[%s%s] %3d%%  %s", strings.Repeat("#", n), strings.Repeat(".", width-n), percent(s), progressLine(s))
			if s.Fraction >= 1 {
				fmt.Fprintln(w)
			}
		}
	case "lines":
		return func(s Snapshot) {
			fmt.Fprintf(w, "bench: %3d%%  %s\n", percent(s), progressLine(s))
		}
	default:
		return nil
	}
}

func progressLine(s Snapshot) string {
	rate := 0.0
	if sec := s.Elapsed.Seconds(); sec > 0 {
		rate = float64(s.OK) / sec
	}
	return fmt.Sprintf("%6.1fs  %d ok  %d failed  %d in flight  %.1f turns/s", s.Elapsed.Seconds(), s.OK, s.Failed, s.InFlight, rate)
}

// percent is s.Fraction in whole percent, rounded down: 100 only at the end.
func percent(s Snapshot) int { return int(100 * s.Fraction) }
