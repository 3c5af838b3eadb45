package sessionreduceclient_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/udf/sessionreduceclient"
)

// serveMain runs numaflow-go's session counter example with numaflow-go's
// own server, listening in the directory SESSION_DIR rather than in
// /var/run/numaflow.
const serveMain = `package main

import (
	"context"
	"log"
	"os"
	"path/filepath"

	"github.com/numaproj/numaflow-go/pkg/sessionreducer"
)

func main() {
	dir := os.Getenv("SESSION_DIR")
	err := sessionreducer.NewServer(&SessionCounterCreator{},
		sessionreducer.WithSockAddr(filepath.Join(dir, %q)),
		sessionreducer.WithServerInfoFilePath(filepath.Join(dir, %q))).Start(context.Background())
	if err != nil {
		log.Fatal(err)
	}
}
`

// numaflowGoCounter builds numaflow-go's examples/sessionreducer/counter of
// the source tree NUMAFLOW_GO_DIR names, as it is but for its main, and
// runs it in a new socket directory until the test ends; it returns the
// directory. It skips the test without NUMAFLOW_GO_DIR.
func numaflowGoCounter(t *testing.T) string {
	t.Helper()
	src := os.Getenv("NUMAFLOW_GO_DIR")
	if src == "" {
		t.Skip("NUMAFLOW_GO_DIR is not set: numaflow-go's sessionreducer/counter example is not run")
	}
	src, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	exampleDir := filepath.Join(src, "examples", "sessionreducer", "counter")
	mod := t.TempDir()
	copyFile := func(name string, edit func([]byte) []byte) {
		b, err := os.ReadFile(filepath.Join(exampleDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mod, name), edit(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("main.go", func(b []byte) []byte {
		return bytes.Replace(b, []byte("\nfunc main() {"), []byte("\nfunc exampleMain() {"), 1)
	})
	copyFile("go.sum", func(b []byte) []byte { return b })
	copyFile("go.mod", func(b []byte) []byte {
		return regexp.MustCompile(`(?m)^replace github.com/numaproj/numaflow-go => .*$`).
			ReplaceAll(b, []byte("replace github.com/numaproj/numaflow-go => "+src))
	})
	k := serverinfo.KindSessionReduce
	if err := os.WriteFile(filepath.Join(mod, "serve.go"), fmt.Appendf(nil, serveMain, k.Socket(), k.InfoFile()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "counter")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = mod
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building numaflow-go's session counter: %v\n%s", err, out)
	}
	dir, err := os.MkdirTemp("", "sessionreduce")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var stderr bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "SESSION_DIR="+dir)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Error(err)
		}
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("numaflow-go's session counter did not stop within 10s of SIGTERM\n%s", stderr.String())
		}
	})
	return dir
}

// numaflow-go's session counter, run by numaflow-go's own server, counts
// sessions that sluice's client opens, appends to, expands, merges and
// closes, and whole sessions one after another.
func TestNumaflowGoSessionCounter(t *testing.T) {
	dir := numaflowGoCounter(t)
	c := sessionreduceclient.New(dir, nil)
	t.Cleanup(func() { _ = c.Close() })
	ctx := testContext(t)
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	a, b := []string{"a"}, []string{"b"}
	steps := []func() error{
		func() error { return c.Open(ctx, win(100, 110, "a"), message(a, 100, "x")) },
		func() error { return c.Append(ctx, win(100, 110, "a"), message(a, 104, "x")) },
		func() error { return c.Open(ctx, win(120, 130, "a"), message(a, 120, "x")) },
		func() error { return c.Open(ctx, win(100, 110, "b"), message(b, 100, "x")) },
		func() error { return c.Expand(ctx, win(100, 110, "a"), win(100, 118, "a"), message(a, 108, "x")) },
		func() error { return c.Expand(ctx, win(100, 118, "a"), win(100, 120, "a"), message(a, 110, "x")) },
		func() error { return c.Merge(ctx, win(100, 120, "a"), win(120, 130, "a")) },
		func() error { return c.Append(ctx, win(100, 130, "a"), message(a, 125, "x")) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	res, err := c.CloseSessions(ctx, win(100, 110, "b"), win(100, 130, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if got := describe(res[0]) + " | " + describe(res[1]); got != "b=1@109999 [100,110) | a=6@129999 [100,130)" {
		t.Errorf("results %q", got)
	}
	for i := range 3 {
		start := int64(200 + 20*i)
		r, err := c.Reduce(ctx, win(start, start+10, "k"), []sessionreduceclient.Message{message([]string{"k"}, start, "x"), message([]string{"k"}, start+1, "y")})
		if want := fmt.Sprintf("k=2@%d [%d,%d)", (start+10)*1000-1, start, start+10); err != nil || describe(r) != want {
			t.Errorf("session %d: %q, %v; want %q", i, describe(r), err, want)
		}
	}
}
