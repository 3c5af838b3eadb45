package expr_test

import (
	"errors"
	"testing"

	"github.com/sluiceflow/sluice/internal/expr"
)

func TestCost(t *testing.T) {
	tests := []struct {
		name, src string
		payload   string
		headers   map[string]string
		keys      []string
		want      int64
		err       bool
	}{
		{"payload size", "len(payload)", "hello", nil, nil, 5, false},
		{"constant", "3", "", nil, nil, 3, false},
		{"zero", "0", "x", nil, nil, 0, false},
		{"header", `"w" in headers ? int(headers["w"]) : 1`, "", map[string]string{"w": "7"}, nil, 7, false},
		{"header missing", `"w" in headers ? int(headers["w"]) : 1`, "", nil, nil, 1, false},
		{"key", `keys[0] == "bulk" ? 10 : 1`, "", nil, []string{"bulk"}, 10, false},
		{"fraction rounds up", "len(payload) / 4", "hello", nil, nil, 2, false},
		{"json field", "json(payload).n", `{"n": 2.5}`, nil, nil, 3, false},
		{"negative", "0 - len(payload)", "ab", nil, nil, 1, true},
		{"not a number at run time", "json(payload).n", `{"n": "a"}`, nil, nil, 1, true},
		{"failed evaluation", "json(payload).n", `not json`, nil, nil, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := expr.CompileCost(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Of([]byte(tt.payload), tt.headers, tt.keys)
			if got != tt.want || (err != nil) != tt.err {
				t.Fatalf("Of = %d, %v; want %d, error %v", got, err, tt.want, tt.err)
			}
			if err != nil && !errors.Is(err, expr.ErrCost) {
				t.Errorf("error %v does not match ErrCost", err)
			}
		})
	}
}

func TestCompileCostErrors(t *testing.T) {
	for _, src := range []string{"", "len(", "payload", "nosuch + 1", `keys[0] == "a"`} {
		if c, err := expr.CompileCost(src); err == nil {
			t.Errorf("CompileCost(%q) = %v, want an error", src, c)
		}
	}
}

func TestCostAllocs(t *testing.T) {
	c, err := expr.CompileCost("len(payload)")
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("0123456789")
	if n := testing.AllocsPerRun(100, func() { _, _ = c.Of(payload, nil, nil) }); n > 1 {
		t.Errorf("Of allocates %v times per message, want at most 1 (the VM's result)", n)
	}
}

func BenchmarkCost(b *testing.B) {
	c, err := expr.CompileCost("len(payload)")
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 100)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = c.Of(payload, nil, nil)
	}
}

// TestCostOfSize: an expression of the payload's length alone gives what
// the expression machine gives, at no allocation.
func TestCostOfSize(t *testing.T) {
	for _, src := range []string{"len(payload)", "len(payload) / 1024", "len(payload) * 2 + 1", "3", "2.5",
		"len(payload) - 100", "(len(payload) + 1023) / 1024", "len(payload) / 0"} {
		c, err := expr.CompileCost(src)
		if err != nil {
			t.Fatal(err)
		}
		slow, err := expr.CompileCost(src + " + len(keys) * 0") // not of the length alone
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{0, 1, 99, 100, 1000, 1024, 5000} {
			p := make([]byte, size)
			got, gerr := c.Of(p, nil, nil)
			want, werr := slow.Of(p, nil, nil)
			if got != want || (gerr != nil) != (werr != nil) {
				t.Errorf("%s at %d bytes: %d, %v; the machine gives %d, %v", src, size, got, gerr, want, werr)
			}
		}
	}
	c, _ := expr.CompileCost("len(payload) / 1000000")
	p := make([]byte, 8)
	if n := testing.AllocsPerRun(100, func() { _, _ = c.Of(p, nil, nil) }); n > 0 {
		t.Errorf("Of allocates %v times", n)
	}
}
