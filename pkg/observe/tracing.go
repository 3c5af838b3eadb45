package observe

import (
	"context"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracingShutdown bounds the export of the last spans at shutdown.
const tracingShutdown = 2 * time.Second

// NewTracer returns a tracer of forward iterations exporting to an OTLP gRPC
// endpoint: endpoint, or else $OTEL_EXPORTER_OTLP_ENDPOINT (or its traces
// variant). With neither it returns a nil tracer: no tracing, and no cost per
// forward iteration. The spans' resource names the vertex and the replica;
// shutdown exports what is left.
func NewTracer(ctx context.Context, endpoint, vertex string, replica int) (_ trace.Tracer, shutdown func(), _ error) {
	opts := []otlptracegrpc.Option{}
	switch {
	case endpoint != "":
		opts = append(opts, otlptracegrpc.WithEndpointURL(endpoint))
	case os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "":
	default:
		return nil, func() {}, nil
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, nil, err
	}
	res := resource.NewSchemaless(attribute.String("service.name", "sluice-vertex"),
		attribute.String("vertex", vertex), attribute.String("replica", strconv.Itoa(replica)))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	shutdown = func() {
		sctx, cancel := context.WithTimeout(context.Background(), tracingShutdown)
		defer cancel()
		tp.Shutdown(sctx)
	}
	return tp.Tracer("github.com/sluiceflow/sluice/pkg/forward"), shutdown, nil
}
