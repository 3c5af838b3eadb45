package sideinputs

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluiceflow/sluice/internal/natstest"
)

// TestKVFiles puts values in the bucket before and after a Files starts
// watching it: the files hold the latest value of each side input named.
func TestKVFiles(t *testing.T) {
	s := natstest.Start(t, natstest.Options{})
	js, err := jetstream.New(s.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	put, err := OpenKV(ctx, js, BucketName("enrich"))
	if err != nil {
		t.Fatal(err)
	}
	if err := put.Put(ctx, "a", []byte("before")); err != nil {
		t.Fatal(err)
	}
	watch, err := OpenKV(ctx, js, BucketName("enrich"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "si")
	f := NewFiles(dir, watch, []string{"a", "b"}, nil)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(wctx) }()
	waitFile(t, filepath.Join(dir, "a"), "before")
	for _, kv := range [][2]string{{"b", "one"}, {"a", "after"}, {"c", "not named"}} {
		if err := put.Put(ctx, kv[0], []byte(kv[1])); err != nil {
			t.Fatal(err)
		}
	}
	waitFile(t, filepath.Join(dir, "b"), "one")
	waitFile(t, filepath.Join(dir, "a"), "after")
	if err := f.Gate([]string{"a", "b"}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run = %v", err)
	}
}
