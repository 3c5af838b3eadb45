package sideinput_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	rt "github.com/sluiceflow/sluice/pkg/pipeline/sideinputs"
	"github.com/sluiceflow/sluice/pkg/sdk/sideinput"
	"github.com/sluiceflow/sluice/pkg/udf/sideinputclient"
)

// TestServe serves a counter that broadcasts odd counts alone, and asks it as
// the runtime does.
func TestServe(t *testing.T) {
	dir, err := os.MkdirTemp("", "si")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := 0
	srv := sideinput.NewServer(sideinput.RetrieveFunc(func(context.Context) sideinput.Message {
		n++
		if n%2 == 0 {
			return sideinput.NoBroadcastMessage()
		}
		return sideinput.BroadcastMessage([]byte{byte('0' + n)})
	}), sideinput.WithSocketDir(dir))
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Start(sctx) }()

	r := sideinputclient.New(dir, nil, nil)
	defer r.Close()
	for i, want := range []struct {
		value     string
		broadcast bool
	}{{"1", true}, {"", false}, {"3", true}} {
		v, b, err := r.Retrieve(ctx)
		if err != nil || string(v) != want.value || b != want.broadcast {
			t.Errorf("call %d: %q, broadcast %v, %v; want %q, %v", i+1, v, b, err, want.value, want.broadcast)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Start = %v", err)
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(sideinput.EnvDir, dir)
	if got := sideinput.Path("tick"); got != filepath.Join(dir, "tick") {
		t.Errorf("Path = %q", got)
	}
	if _, err := sideinput.Read("tick"); !os.IsNotExist(err) {
		t.Errorf("Read before a value = %v", err)
	}
	if err := rt.WriteFile(dir, "tick", []byte("7")); err != nil {
		t.Fatal(err)
	}
	if v, err := sideinput.Read("tick"); err != nil || string(v) != "7" {
		t.Errorf("Read = %q, %v", v, err)
	}
	t.Setenv(sideinput.EnvDir, "")
	if got := sideinput.Dir(); got != rt.DefaultDir {
		t.Errorf("Dir without the variable = %q, want %q", got, rt.DefaultDir)
	}
}
