package keda_test

import (
	"context"
	"fmt"

	"github.com/sluiceflow/sluice/pkg/apis/proto/externalscaler"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale/keda"
)

// A Server for one vertex answers KEDA with the rule's count: before its
// first read of the replicas, the rule's min. Serve it with Server.Serve on
// a listener (vertex scaler does), or register it on a grpc.Server and call
// Run beside it.
func Example() {
	scale := autoscale.DefaultConfig()
	scale.Min = 2
	srv, err := keda.New(keda.Config{Vertices: []keda.Vertex{{Name: "in", Scale: scale, Status: []string{"127.0.0.1:2469"}}}})
	if err != nil {
		panic(err)
	}
	ref := &externalscaler.ScaledObjectRef{ScalerMetadata: map[string]string{"vertex": "in"}}
	spec, _ := srv.GetMetricSpec(context.Background(), ref)
	m, _ := srv.GetMetrics(context.Background(), &externalscaler.GetMetricsRequest{ScaledObjectRef: ref})
	fmt.Println(spec.MetricSpecs[0].MetricName, "target", spec.MetricSpecs[0].TargetSize)
	fmt.Println("replicas", m.MetricValues[0].MetricValue)
	// Output:
	// sluice-desired-replicas target 1
	// replicas 2
}
