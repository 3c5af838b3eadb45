// Command eventtime is a source transformer that takes each message's event
// time from its JSON payload's "ts" field, in milliseconds since the Unix
// epoch ({"ts": 1700000000000, ...}); a message without one keeps the event
// time the source gave it. A payload containing "drop" is dropped.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log"
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/sourcetransformer"
)

func main() {
	st := sourcetransformer.SourceTransformerFunc(eventTime)
	if err := sourcetransformer.NewServer(st).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func eventTime(_ context.Context, keys []string, d sourcetransformer.Datum) sourcetransformer.Messages {
	if bytes.Contains(d.Value(), []byte("drop")) {
		return sourcetransformer.Messages{sourcetransformer.MessageToDrop(d.EventTime())}
	}
	et := d.EventTime()
	var payload struct {
		TS *int64 `json:"ts"`
	}
	if json.Unmarshal(d.Value(), &payload) == nil && payload.TS != nil {
		et = time.UnixMilli(*payload.TS)
	}
	return sourcetransformer.Messages{sourcetransformer.NewMessage(d.Value(), et).WithKeys(keys)}
}
