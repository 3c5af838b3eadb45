package pipeline

import (
	"encoding/json"
	"testing"
)

// The side-inputs manager's /status names its pipeline, and notReady is ""
// while it is ready.
func TestSideInputsManagerStatus(t *testing.T) {
	m := &SideInputsManager{pipeline: "p", si: &sideInputs{}}
	b, err := json.Marshal(m.Status())
	if want := `{"notReady":"","sideInputsManager":"p"}`; err != nil || string(b) != want {
		t.Errorf("%s, %v; want %s", b, err, want)
	}
}
