package tool

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
)

// positiveDuration parses the duration of a config field; on a problem it
// returns the message instead.
func positiveDuration(field, v string) (time.Duration, string) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, fmt.Sprintf("%s %q is not a duration such as \"30s\"", field, v)
	case d <= 0:
		return 0, field + " must be positive"
	}
	return d, ""
}

// absoluteURL expands ${VAR} in the URL of a config field and checks that
// it is an absolute http or https URL; it drops the fragment. On a problem
// it returns the message instead. The URL may hold secrets once expanded:
// the message describes it, never echoes it.
func absoluteURL(field, raw string, env func(string) (string, bool)) (string, string) {
	expanded, err := expandEnv(raw, env)
	if err != nil {
		return "", fmt.Sprintf("%s: %v", field, err)
	}
	u, err := url.Parse(expanded)
	switch {
	case err != nil, !u.IsAbs(), u.Host == "":
		return "", field + " must be an absolute http or https URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Sprintf("%s must be an absolute http or https URL (scheme is %q)", field, u.Scheme)
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String(), ""
}

// optionsProblem describes an error of completion.Options.Validate as a
// config problem: the field under pending it is about, and the message.
func optionsProblem(err error) (field, msg string) {
	var oe *completion.OptionsError
	if !errors.As(err, &oe) {
		return "", "pending: " + err.Error()
	}
	v := oe.Value
	if len(v) > 64 {
		v = v[:64] + "..."
	}
	return oe.Field, fmt.Sprintf("pending.%s %q: %s", oe.Field, v, oe.Reason)
}

// retryPolicy checks a retry block, defaulting what it leaves out. A
// problem comes with the field it is about.
func retryPolicy(r rawRetry) (p dispatch.RetryPolicy, field string, err error) {
	p = defaultRetry
	if r.MaxAttempts != nil {
		p.MaxAttempts = *r.MaxAttempts
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > MaxAttempts {
		return p, "max_attempts", fmt.Errorf("must be between 1 and %d", MaxAttempts)
	}
	for _, d := range []struct {
		name string
		src  *string
		dst  *time.Duration
	}{{"initial_interval", r.InitialInterval, &p.InitialInterval}, {"max_interval", r.MaxInterval, &p.MaxInterval}} {
		if d.src == nil {
			continue
		}
		v, err := time.ParseDuration(*d.src)
		if err != nil {
			return p, d.name, fmt.Errorf("%q is not a duration such as \"200ms\"", *d.src)
		}
		if v <= 0 {
			return p, d.name, errors.New("must be positive")
		}
		*d.dst = v
	}
	if p.MaxInterval < p.InitialInterval {
		return p, "max_interval", errors.New("must not be less than initial_interval")
	}
	if r.Multiplier != nil {
		p.Multiplier = *r.Multiplier
	}
	if !(p.Multiplier >= 1) || math.IsInf(p.Multiplier, 0) { // !(>=) catches NaN
		return p, "multiplier", errors.New("must be a number ≥ 1")
	}
	if r.Jitter != nil {
		p.Jitter = *r.Jitter
	}
	if !(p.Jitter >= 0 && p.Jitter <= 1) {
		return p, "jitter", errors.New("must be between 0 and 1")
	}
	return p, "", nil
}

// expandEnv replaces ${NAME} with the variable's value and $$ with $. An
// unset variable is an error naming it (never its value).
func expandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", errors.New("unterminated ${")
			}
			name := s[i+2 : i+2+end]
			if !envName.MatchString(name) {
				return "", fmt.Errorf("${%s} is not a valid variable reference", name)
			}
			v, ok := lookup(name)
			if !ok {
				return "", fmt.Errorf("environment variable %s is not set", name)
			}
			b.WriteString(v)
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue rejects control characters other than tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
