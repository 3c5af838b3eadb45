package window

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// at is Unix second s plus ms milliseconds.
func at(s int64, ms int) time.Time { return time.Unix(s, int64(ms)*int64(time.Millisecond)) }

func spans(ws []Window) string {
	out := ""
	for _, w := range ws {
		out += fmt.Sprintf("[%d,%d)", w.Start.Unix(), w.End.Unix())
	}
	return out
}

func TestAssign(t *testing.T) {
	minute, _ := Fixed(time.Minute)
	seven, _ := Fixed(7 * time.Second)
	slide, _ := Sliding(time.Minute, 10*time.Second)
	uneven, _ := Sliding(25*time.Second, 10*time.Second)
	tests := []struct {
		name string
		s    Strategy
		t    time.Time
		want string
	}{
		{"fixed, inside", minute, at(1_700_000_030, 500), "[1699999980,1700000040)"},
		{"fixed, on a start", minute, at(1_700_000_040, 0), "[1700000040,1700000100)"},
		{"fixed, the last nanosecond", minute, time.Unix(1_700_000_039, 999_999_999), "[1699999980,1700000040)"},
		{"fixed, aligned to the Unix epoch", seven, at(20, 0), "[14,21)"},
		{"fixed, before 1970", seven, at(-1, 0), "[-7,0)"},
		{"sliding, six windows", slide, at(1_700_000_045, 0),
			"[1699999990,1700000050)[1700000000,1700000060)[1700000010,1700000070)[1700000020,1700000080)[1700000030,1700000090)[1700000040,1700000100)"},
		{"sliding, length not a multiple of the slide", uneven, at(100, 0), "[80,105)[90,115)[100,125)"},
		{"sliding, just past a start", uneven, at(104, 999), "[80,105)[90,115)[100,125)"},
		{"sliding, a start leaves", uneven, at(105, 0), "[90,115)[100,125)"},
		{"zero strategy", Strategy{}, at(100, 0), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := tt.s.Assign(nil, tt.t)
			if got := spans(ws); got != tt.want {
				t.Errorf("Assign(%v) = %s, want %s", tt.t, got, tt.want)
			}
			for _, w := range ws {
				if !w.Contains(tt.t) {
					t.Errorf("%v does not contain %v", w, tt.t)
				}
			}
		})
	}
}

func TestStrategyErrors(t *testing.T) {
	for _, tt := range []struct {
		name          string
		length, slide time.Duration
		want          string
	}{
		{"zero length", 0, time.Second, "length (0s) must be positive"},
		{"negative slide", time.Minute, -time.Second, "slide (-1s) must be positive"},
		{"slide past the length", time.Minute, 2 * time.Minute, "slide (2m0s) must be at most the length (1m0s)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Sliding(tt.length, tt.slide)
			if !errors.Is(err, ErrInvalid) || err.Error() != "window: invalid strategy: "+tt.want {
				t.Errorf("Sliding(%v, %v) = %v; want %q", tt.length, tt.slide, err, tt.want)
			}
		})
	}
	if _, err := Fixed(-time.Second); !errors.Is(err, ErrInvalid) {
		t.Errorf("Fixed(-1s) = %v", err)
	}
}

func TestWindowText(t *testing.T) {
	w := Window{Start: at(0, 0), End: at(60, 0)}
	if got := w.String(); got != "[1970-01-01T00:00:00Z, 1970-01-01T00:01:00Z)" {
		t.Errorf("String() = %q", got)
	}
	if got := w.ResultTime(); !got.Equal(at(59, 999)) {
		t.Errorf("ResultTime() = %v, want a millisecond before the end", got)
	}
}
