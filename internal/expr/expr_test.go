package expr_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluiceflow/sluice/internal/expr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCompileEmpty(t *testing.T) {
	tests := []struct {
		name    string
		compile func(string) (*expr.Program, error)
	}{
		{"bool", expr.CompileBool},
		{"string", expr.CompileString},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.compile("")
			if err == nil {
				t.Fatalf("compiling \"\" = %v, want an error", p)
			}
			if !strings.Contains(err.Error(), "empty") {
				t.Errorf("error %q does not say the expression is empty", err)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		compile func(string) (*expr.Program, error)
	}{
		{"syntax error", "1 +", expr.CompileString},
		{"unknown variable", "nosuch == 1", expr.CompileBool},
		{"bool: number", "1 + 2", expr.CompileBool},
		{"bool: string literal", `"true"`, expr.CompileBool},
		{"bool: the payload", "payload", expr.CompileBool},
		{"bool: string function", "upper(payload)", expr.CompileBool},
		{"bool: int conversion", "int(json(payload).id)", expr.CompileBool},
		{"bool: sprig map", "sprig", expr.CompileBool},
		{"unbalanced parenthesis", "(payload", expr.CompileString},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := tt.compile(tt.src); err == nil {
				t.Fatalf("compiling %q = %v, want an error", tt.src, p)
			}
		})
	}
}

func TestBool(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		payload string
		want    bool
		wantErr bool
	}{
		{"even id", "int(json(payload).id) % 2 == 0", `{"id":4}`, true, false},
		{"odd id", "int(json(payload).id) % 2 == 0", `{"id":3}`, false, false},
		{"id as a string", "int(json(payload).id) % 2 == 0", `{"id":"8"}`, true, false},
		{"payload not JSON", "int(json(payload).id) % 2 == 0", `id=4`, false, true},
		{"payload a JSON array", "int(json(payload).id) % 2 == 0", `[4]`, false, true},
		{"missing field", "int(json(payload).id) % 2 == 0", `{"name":"x"}`, false, true},
		{"string comparison", `payload == "hello"`, "hello", true, false},
		{"string function", `payload startsWith "he"`, "hello", true, false},
		{"empty payload", `payload == ""`, "", true, false},
		{"sprig contains", "sprig.contains('James', json(payload).name)", `{"name":"James Bond"}`, true, false},
		{"sprig does not contain", "sprig.contains('James', json(payload).name)", `{"name":"Bond"}`, false, false},
		{"sprig hasPrefix", "sprig.hasPrefix('x-', payload)", "x-y", true, false},
		// The type of a JSON field is unknown at compile time: a field that is not a
		// bool is an error when the program runs.
		{"any-typed field that is a bool", "json(payload).ok", `{"ok":true}`, true, false},
		{"any-typed field that is false", "json(payload).ok", `{"ok":false}`, false, false},
		{"any-typed field that is a number", "json(payload).ok", `{"ok":1}`, false, true},
		{"any-typed field that is a string", "json(payload).ok", `{"ok":"true"}`, false, true},
		// A missing field is nil, which a bool expression takes as false.
		{"any-typed field that is missing", "json(payload).ok", `{}`, false, false},
		{"any-typed field that is null", "json(payload).ok", `{"ok":null}`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := expr.CompileBool(tt.src)
			if err != nil {
				t.Fatalf("CompileBool(%q) = %v", tt.src, err)
			}
			if p.String() != tt.src {
				t.Errorf("String() = %q, want %q", p.String(), tt.src)
			}
			got, err := p.Bool([]byte(tt.payload))
			if (err != nil) != tt.wantErr {
				t.Fatalf("Bool(%q) error = %v, want error %v", tt.payload, err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("Bool(%q) = %v, want %v", tt.payload, got, tt.want)
			}
		})
	}
}

func TestBoolOnAStringProgram(t *testing.T) {
	// Bool on a program that gives something else is an error, not a false.
	p, err := expr.CompileString("payload")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.Bool([]byte("true")); err == nil {
		t.Fatalf("Bool on a string result = %v, want an error", got)
	}
}

func TestText(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		payload string
		want    string
		wantErr bool
	}{
		{"the payload", "payload", "hello world", "hello world", false},
		{"empty payload", "payload", "", "", false},
		{"int arithmetic", "1 + 2", "", "3", false},
		{"negative int", "-7 * 3", "", "-21", false},
		{"float", "1.5 * 3", "", "4.5", false},
		{"integral float", "6 / 2", "", "3", false},
		{"bool", "1 < 2", "", "true", false},
		{"json string field", "json(payload).name", `{"name":"James"}`, "James", false},
		{"json nested field", "json(payload).a.b", `{"a":{"b":"deep"}}`, "deep", false},
		{"json small number", "json(payload).n", `{"n":42}`, "42", false},
		{"json fraction", "json(payload).n", `{"n":0.25}`, "0.25", false},
		{"int of a json number", "int(json(payload).ts)", `{"ts":1700000000123}`, "1700000000123", false},
		{"string conversion", "string(42)", "", "42", false},
		{"int conversion", `int("41") + 1`, "", "42", false},
		{"sprig upper", "sprig.upper(payload)", "abc", "ABC", false},
		{"sprig trim", "sprig.trim(payload)", "  x  ", "x", false},
		{"concatenation", `"id-" + json(payload).id`, `{"id":"7"}`, "id-7", false},
		{"json of text that is not JSON", "json(payload).x", "not json", "", true},
		{"json of a JSON array", "json(payload)", "[1,2]", "", true},
		{"json of a JSON string", "json(payload)", `"s"`, "", true},
		{"json of a JSON number", "json(payload)", "12", "", true},
		{"json of an empty payload", "json(payload)", "", "", true},
		{"json of a number", "json(12)", "", "", true},
		{"json with two arguments", "json(payload, payload)", "{}", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := expr.CompileString(tt.src)
			if err != nil {
				if tt.wantErr {
					return // rejected when compiled, which is as good
				}
				t.Fatalf("CompileString(%q) = %v", tt.src, err)
			}
			got, err := p.Text([]byte(tt.payload))
			if (err != nil) != tt.wantErr {
				t.Fatalf("Text(%q) = %q, %v; want error %v", tt.payload, got, err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("Text(%q) = %q, want %q", tt.payload, got, tt.want)
			}
		})
	}
}

func TestTextLargeJSONNumber(t *testing.T) {
	p, err := expr.CompileString("json(payload).ts")
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Text([]byte(`{"ts":1700000000123}`))
	if err != nil || got != "1700000000123" {
		t.Fatalf("Text = %q, %v; want 1700000000123", got, err)
	}
}

func TestPayloadNotChanged(t *testing.T) {
	p, err := expr.CompileString(`sprig.upper(payload) + "!"`)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("abc")
	got, err := p.Text(payload)
	if err != nil || got != "ABC!" {
		t.Fatalf("Text = %q, %v", got, err)
	}
	if string(payload) != "abc" {
		t.Fatalf("payload changed to %q", payload)
	}
	// The result does not share memory with the payload once it is changed.
	copy(payload, "xyz")
	if got != "ABC!" {
		t.Fatalf("result changed to %q with the payload", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	tests := []struct {
		name string
		src  string
		run  func(p *expr.Program, i int) error
	}{
		{"bool", "int(json(payload).id) % 2 == 0", func(p *expr.Program, i int) error {
			got, err := p.Bool([]byte(`{"id":` + strconv.Itoa(i) + `}`))
			if err != nil {
				return err
			}
			if got != (i%2 == 0) {
				return fmt.Errorf("id %d: got %v", i, got)
			}
			return nil
		}},
		{"text", `json(payload).name + "-" + sprig.upper(json(payload).name)`, func(p *expr.Program, i int) error {
			name := "n" + strconv.Itoa(i)
			got, err := p.Text([]byte(`{"name":"` + name + `"}`))
			if err != nil {
				return err
			}
			if want := name + "-" + strings.ToUpper(name); got != want {
				return fmt.Errorf("got %q, want %q", got, want)
			}
			return nil
		}},
		{"errors", "json(payload).x == 1", func(p *expr.Program, i int) error {
			// Failing runs must not spoil the program for the others.
			if i%3 == 0 {
				if _, err := p.Bool([]byte("not json")); err == nil {
					return fmt.Errorf("no error for a payload that is not JSON")
				}
				return nil
			}
			got, err := p.Bool([]byte(`{"x":` + strconv.Itoa(i%2) + `}`))
			if err != nil {
				return err
			}
			if got != (i%2 == 1) {
				return fmt.Errorf("x %d: got %v", i%2, got)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p *expr.Program
			var err error
			if tt.name == "text" {
				p, err = expr.CompileString(tt.src)
			} else {
				p, err = expr.CompileBool(tt.src)
			}
			if err != nil {
				t.Fatal(err)
			}
			const goroutines, runs = 16, 200
			errs := make(chan error, goroutines)
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range runs {
						if err := tt.run(p, g*runs+i); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
