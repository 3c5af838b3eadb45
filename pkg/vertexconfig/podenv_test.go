package vertexconfig

import "testing"

func TestReadAhead(t *testing.T) {
	for _, tt := range []struct {
		value   string
		on, set bool
		err     string
	}{
		{"", false, false, ""},
		{"true", true, true, ""},
		{"false", false, true, ""},
		{"maybe", false, false, `NUMAFLOW_READ_AHEAD ("maybe"): want true or false`},
	} {
		on, set, err := ReadAhead(tt.value)
		if got := errText(err); on != tt.on || set != tt.set || got != tt.err {
			t.Errorf("%q: %v, %v, %q; want %v, %v, %q", tt.value, on, set, got, tt.on, tt.set, tt.err)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
