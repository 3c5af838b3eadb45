package spawn

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/clock"
)

// runsEnv names the file in which TestHelperFlaky counts its runs.
const runsEnv = "SLUICE_TEST_RUNS"

// TestHelperFlaky is not a test: started as a container with helperEnv set
// to "flaky", it exits 1 at once in its first two runs, and runs until killed
// in the next ones.
func TestHelperFlaky(t *testing.T) {
	if os.Getenv(helperEnv) != "flaky" {
		t.Skip("runs only as a spawned container")
	}
	path := os.Getenv(runsEnv)
	runs, _ := os.ReadFile(path)
	runs = append(runs, 'x')
	if err := os.WriteFile(path, runs, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	if len(runs) <= 2 {
		os.Exit(1)
	}
	time.Sleep(time.Hour)
	os.Exit(0)
}

// A container that exits is started again after a pause that doubles from
// 100ms while it keeps exiting at once, and is 100ms again after a run longer
// than 10s; the pauses are timed on the clock given, here a manual one.
func TestRestartPauses(t *testing.T) {
	dir := shortDir(t)
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	core, logs := observer.New(zapcore.InfoLevel)
	spec := &config.Container{Image: "helper", Command: []string{os.Args[0]}, Args: []string{"-test.run=^TestHelperFlaky$"},
		Env: []config.EnvVar{{Name: helperEnv, Value: "flaky"}, {Name: runsEnv, Value: filepath.Join(dir, "runs")}}}
	f := &config.File{MonoVertex: &config.MonoVertex{Metadata: config.Metadata{Name: "flaky"},
		Spec: config.MonoVertexSpec{UDF: &config.UDF{Container: spec}}}}
	var stderr lockedBuffer
	g, err := Start(f, dir, Deps{Commands: true, Stderr: &stderr, Log: zap.New(core), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), spawnWait)
	defer cancel()

	const exited = "user-defined container exited; starting it again"
	// pause waits for the container to exit and to wait out its pause on
	// clk, and returns that pause.
	pause := func(exits int) time.Duration {
		t.Helper()
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatalf("waiting for exit %d: %v\nthe container wrote:\n%s", exits, err, stderr.String())
		}
		all := logs.FilterMessage(exited).All()
		if len(all) != exits {
			t.Fatalf("%d exits logged; want %d", len(all), exits)
		}
		d, _ := all[exits-1].ContextMap()["in"].(time.Duration)
		return d
	}
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		if got := pause(i + 1); got != want {
			t.Fatalf("pause after exit %d: %v; want %v", i+1, got, want)
		}
		clk.Advance(want)
	}
	// The third run lasts: 11s on the clock, then SIGKILL.
	var pid int64
	for pid == 0 {
		if started := logs.FilterMessage("started user-defined container").All(); len(started) == 3 {
			pid, _ = started[2].ContextMap()["pid"].(int64)
		} else if ctx.Err() != nil {
			t.Fatalf("%d starts; want 3", len(started))
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	clk.Advance(11 * time.Second)
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := pause(3); got != 100*time.Millisecond {
		t.Fatalf("pause after a run of 11s: %v; want 100ms", got)
	}
}
