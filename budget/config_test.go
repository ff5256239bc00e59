package budget

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   Config
		want Config
	}{
		{"zero", Config{}, Config{Limit: 16384, MaxLines: 400, Mode: ModeBytes, Window: WindowHeadTail, HeadShare: 0.5}},
		{"set fields stay", Config{Limit: 7, MaxLines: 3, Mode: ModeTokens, Window: WindowTail, HeadShare: 0.25},
			Config{Limit: 7, MaxLines: 3, Mode: ModeTokens, Window: WindowTail, HeadShare: 0.25}},
		{"some fields", Config{Limit: 100, Window: WindowHead}, Config{Limit: 100, MaxLines: 400, Mode: ModeBytes, Window: WindowHead, HeadShare: 0.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.in.WithDefaults(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("WithDefaults() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    Config
		field string // "" means valid
	}{
		{"zero", Config{}, ""},
		{"defaults", Config{}.WithDefaults(), ""},
		{"tokens tail", Config{Mode: ModeTokens, Window: WindowTail, HeadShare: 1}, ""},
		{"negative limit", Config{Limit: -1}, "limit"},
		{"negative lines", Config{MaxLines: -5}, "max_lines"},
		{"unknown mode", Config{Mode: "words"}, "mode"},
		{"unknown window", Config{Window: "middle"}, "window"},
		{"share below 0", Config{HeadShare: -0.1}, "head_share"},
		{"share above 1", Config{HeadShare: 1.5}, "head_share"},
		{"share NaN", Config{HeadShare: math.NaN()}, "head_share"},
		{"errors window", Config{Window: WindowErrors, Patterns: []string{"oops", "E:"}, TurnLimit: 4096}, ""},
		{"unknown window errs", Config{Window: "error"}, "window"},
		{"negative turn limit", Config{TurnLimit: -1}, "turn_limit"},
		{"empty pattern", Config{Patterns: []string{"ok", ""}}, "patterns"},
		{"multi-line pattern", Config{Patterns: []string{"a\r\nb"}}, "patterns"},
		{"long pattern", Config{Patterns: []string{strings.Repeat("x", MaxPatternLength+1)}}, "patterns"},
		{"too many patterns", Config{Patterns: make([]string, MaxPatterns+1)}, "patterns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.in.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("Validate() = %v, want a ConfigError for %s", err, tt.field)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not match ErrInvalidConfig", err)
			}
			if _, err := New(tt.in); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("New accepted %+v: %v", tt.in, err)
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       Config
		opts     []Option
		want     Config
		sizeCap  int
		maxLines int
	}{
		{"defaults", Config{}, nil, Config{}.WithDefaults(), 16384, 400},
		{"tokens", Config{Limit: 10, Mode: ModeTokens}, nil,
			Config{Limit: 10, MaxLines: 400, Mode: ModeTokens, Window: WindowHeadTail, HeadShare: 0.5}, 40, 400},
		{"no defaults keeps zeros", Config{}, []Option{NoDefaults()},
			Config{Mode: ModeBytes, Window: WindowHeadTail}, 0, 0},
		{"huge token limit saturates", Config{Limit: math.MaxInt, Mode: ModeTokens}, nil,
			Config{Limit: math.MaxInt, MaxLines: 400, Mode: ModeTokens, Window: WindowHeadTail, HeadShare: 0.5}, math.MaxInt, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustNew(t, tt.in, tt.opts...)
			if got := p.Config(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Config() = %+v, want %+v", got, tt.want)
			}
			if p.sizeCap != tt.sizeCap || p.lineCap != tt.maxLines {
				t.Errorf("caps = %d bytes, %d lines; want %d, %d", p.sizeCap, p.lineCap, tt.sizeCap, tt.maxLines)
			}
		})
	}
}

func TestConfigJSONNames(t *testing.T) {
	t.Parallel()
	var c Config
	in := `{"limit":5,"max_lines":6,"mode":"tokens","window":"tail","head_share":0.75}`
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	want := Config{Limit: 5, MaxLines: 6, Mode: ModeTokens, Window: WindowTail, HeadShare: 0.75}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("decoded %+v, want %+v", c, want)
	}
}
