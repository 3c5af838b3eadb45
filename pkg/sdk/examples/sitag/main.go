// Command sitag is a map UDF that appends the current value of a side input
// to every payload, as "<payload>|<name>=<value>", and tags the message with
// the value. The side input is SITAG_SIDE_INPUT (default "ticker"); its value
// is read from its file at each message, so a new value shows at once.
package main

import (
	"context"
	"log"
	"os"

	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
	"github.com/sluiceflow/sluice/pkg/sdk/sideinput"
)

func main() {
	name := os.Getenv("SITAG_SIDE_INPUT")
	if name == "" {
		name = "ticker"
	}
	tag := func(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
		v, err := sideinput.Read(name)
		if err != nil {
			log.Printf("sitag: side input %s: %v", name, err)
			return mapper.Messages{mapper.NewMessage(d.Value()).WithKeys(keys)}
		}
		out := append(append([]byte{}, d.Value()...), "|"+name+"="+string(v)...)
		return mapper.Messages{mapper.NewMessage(out).WithKeys(keys).WithTags([]string{string(v)})}
	}
	if err := mapper.NewServer(mapper.MapperFunc(tag)).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}
