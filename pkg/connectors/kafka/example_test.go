package kafka_test

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/sluiceflow/sluice/pkg/connectors/kafka"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// A sink writes to a topic and a source of a consumer group reads it back,
// acking what it read so that the group's offset moves past it.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	ctx := context.Background()

	props, err := kafka.ParseProperties("linger.ms: 0\ncompression.type: none\n")
	if err != nil {
		panic(err)
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{
		Client: kafka.ClientConfig{Brokers: cluster.ListenAddrs(), Properties: props},
		Topic:  "orders", SetKey: true,
	})
	if err != nil {
		panic(err)
	}
	defer sink.Close()
	msgs := []isb.Message{{Keys: []string{"eu", "fr"}, Value: []byte("croissant")}, {Keys: []string{"us"}, Value: []byte("bagel")}}
	errs := make([]error, len(msgs))
	if err := sink.Write(ctx, msgs, errs); err != nil {
		panic(err)
	}
	fmt.Println("write errors:", errs)

	source, err := kafka.NewSource(ctx, kafka.SourceConfig{
		Client: kafka.ClientConfig{Brokers: cluster.ListenAddrs()},
		Topics: []string{"orders"}, Group: "kitchen", ReadTimeout: 100 * time.Millisecond,
	})
	if err != nil {
		panic(err)
	}
	defer source.Close()
	buf := make([]isb.ReadMessage, 10)
	for read, tries := 0, 0; read < len(msgs) && tries < 100; tries++ {
		n, err := source.Read(ctx, buf)
		if err != nil {
			panic(err)
		}
		for _, m := range buf[:n] {
			fmt.Printf("%s key=%q value=%s\n", m.ID, m.Keys, m.Value)
		}
		if err := source.Ack(ctx, buf[:n]); err != nil {
			panic(err)
		}
		read += n
	}
	// Output:
	// write errors: [<nil> <nil>]
	// orders:0:0 key=["eu:fr"] value=croissant
	// orders:0:1 key=["us"] value=bagel
}
