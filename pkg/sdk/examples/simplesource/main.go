// Command simplesource is a user-defined source that generates the messages
// "0", "1", "2", ... in memory, with the sequence number as offset, at
// least once: a message read but not acknowledged within the redelivery
// timeout, or negatively acknowledged, is handed out again by a later read;
// an acknowledged one never is. A nack with a delay (NackOptions.Delay) hands
// the message out again no sooner than that delay after the nack; one
// without, at once.
//
// Environment:
//
//   - SIMPLESOURCE_COUNT: the sequence numbers generated are those below
//     this count (default: no end); from 0, it is how many messages.
//   - SIMPLESOURCE_START: the first sequence number (default 0). The source
//     keeps its state in memory: one that restarts starts again here.
//   - SIMPLESOURCE_REDELIVERY_TIMEOUT: how long a message read may go
//     unacknowledged before it is handed out again, as a Go duration
//     (default 30s).
//   - SIMPLESOURCE_DROP_EVERY: when set to N, every N-th message (0, N, 2N,
//     ...) has the payload "drop-<n>" instead of "<n>", for functions that
//     drop it.
//   - SIMPLESOURCE_READ_WAIT: the longest a read with nothing to hand out
//     waits for a message, as a Go duration, never more than the read's own
//     timeout (default: the read's timeout). 0s answers such a read at once
//     with nothing, as many sources do.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
)

const defaultRedelivery = 30 * time.Second

func main() {
	cfg, err := configFromEnv()
	if err != nil {
		log.Fatal(err)
	}
	if err := sourcer.NewServer(newSource(cfg)).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func configFromEnv() (config, error) {
	cfg := config{redelivery: defaultRedelivery, now: time.Now, partition: sourcer.DefaultPartitions()[0]}
	if v := os.Getenv("SIMPLESOURCE_COUNT"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cfg, fmt.Errorf("SIMPLESOURCE_COUNT=%q: not a count: %w", v, err)
		}
		cfg.count = &n
	}
	if v := os.Getenv("SIMPLESOURCE_START"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cfg, fmt.Errorf("SIMPLESOURCE_START=%q: want a whole number, 0 or more", v)
		}
		cfg.start = n
	}
	if v := os.Getenv("SIMPLESOURCE_DROP_EVERY"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return cfg, fmt.Errorf("SIMPLESOURCE_DROP_EVERY=%q: want a whole number, 1 or more", v)
		}
		cfg.dropEvery = n
	}
	if v := os.Getenv("SIMPLESOURCE_REDELIVERY_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("SIMPLESOURCE_REDELIVERY_TIMEOUT=%q: want a positive duration such as 30s", v)
		}
		cfg.redelivery = d
	}
	switch v := os.Getenv("SIMPLESOURCE_METADATA"); v {
	case "", "0", "false":
	case "1", "true":
		cfg.metadata = true
	default:
		return cfg, fmt.Errorf("SIMPLESOURCE_METADATA=%q: want 1 or true, 0 or false", v)
	}
	if v := os.Getenv("SIMPLESOURCE_READ_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return cfg, fmt.Errorf("SIMPLESOURCE_READ_WAIT=%q: want a duration such as 0s or 200ms", v)
		}
		cfg.readWait = &d
	}
	return cfg, nil
}
