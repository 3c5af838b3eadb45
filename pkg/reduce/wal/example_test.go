package wal_test

import (
	"fmt"
	"os"

	"github.com/sluiceflow/sluice/pkg/reduce/wal"
)

// A reduce vertex appends what it reads and syncs before it acks; after a
// restart it replays the log to rebuild its open windows.
func Example() {
	dir, err := os.MkdirTemp("", "wal")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	l, err := wal.Open(dir, wal.Options{})
	if err != nil {
		panic(err)
	}
	for _, m := range []string{"a@10", "b@12", "a@15"} {
		if _, err := l.Append([]byte(m)); err != nil {
			panic(err)
		}
	}
	if err := l.Sync(); err != nil { // now the messages may be acked
		panic(err)
	}
	l.Close() // or a crash

	l, err = wal.Open(dir, wal.Options{})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	err = l.Replay(func(seg uint64, rec []byte) error {
		fmt.Printf("segment %d: %s\n", seg, rec)
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// segment 1: a@10
	// segment 1: b@12
	// segment 1: a@15
}
