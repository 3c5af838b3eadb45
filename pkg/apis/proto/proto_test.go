package proto_test

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	"github.com/sluiceflow/sluice/pkg/apis/proto/externalscaler"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	reducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/reduce/v1"
	sinkv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sink/v1"
	sourcev1 "github.com/sluiceflow/sluice/pkg/apis/proto/source/v1"
	sourcetransformerv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sourcetransformer/v1"
)

// rpcKind describes how an rpc streams: "unary" or "bidi".
func rpcKind(clientStreams, serverStreams bool) string {
	switch {
	case clientStreams && serverStreams:
		return "bidi"
	case !clientStreams && !serverStreams:
		return "unary"
	case clientStreams:
		return "client-stream"
	default:
		return "server-stream"
	}
}

// methodsOf lists the full gRPC method names of a service description with
// their streaming kind, sorted.
func methodsOf(sd *grpc.ServiceDesc) []string {
	var out []string
	for _, m := range sd.Methods {
		out = append(out, fmt.Sprintf("/%s/%s unary", sd.ServiceName, m.MethodName))
	}
	for _, s := range sd.Streams {
		out = append(out, fmt.Sprintf("/%s/%s %s", sd.ServiceName, s.StreamName, rpcKind(s.ClientStreams, s.ServerStreams)))
	}
	sort.Strings(out)
	return out
}

func TestMethodNames(t *testing.T) {
	cases := []struct {
		desc *grpc.ServiceDesc
		want []string
	}{
		{&mapv1.Map_ServiceDesc, []string{
			"/map.v1.Map/IsReady unary",
			"/map.v1.Map/MapFn bidi",
		}},
		{&reducev1.Reduce_ServiceDesc, []string{
			"/reduce.v1.Reduce/IsReady unary",
			"/reduce.v1.Reduce/ReduceFn bidi",
		}},
		{&sinkv1.Sink_ServiceDesc, []string{
			"/sink.v1.Sink/IsReady unary",
			"/sink.v1.Sink/SinkFn bidi",
		}},
		{&sourcev1.Source_ServiceDesc, []string{
			"/source.v1.Source/AckFn bidi",
			"/source.v1.Source/IsReady unary",
			"/source.v1.Source/NackFn unary",
			"/source.v1.Source/PartitionsFn unary",
			"/source.v1.Source/PendingFn unary",
			"/source.v1.Source/ReadFn bidi",
		}},
		{&sourcetransformerv1.SourceTransform_ServiceDesc, []string{
			"/sourcetransformer.v1.SourceTransform/IsReady unary",
			"/sourcetransformer.v1.SourceTransform/SourceTransformFn bidi",
		}},
		{&externalscaler.ExternalScaler_ServiceDesc, []string{
			"/externalscaler.ExternalScaler/GetMetricSpec unary",
			"/externalscaler.ExternalScaler/GetMetrics unary",
			"/externalscaler.ExternalScaler/IsActive unary",
			"/externalscaler.ExternalScaler/StreamIsActive server-stream",
		}},
	}
	for _, c := range cases {
		got := methodsOf(c.desc)
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("service %s methods:\n got %q\nwant %q", c.desc.ServiceName, got, c.want)
		}
	}

	// The generated constants the clients use must carry the same paths.
	constants := map[string]string{
		mapv1.Map_MapFn_FullMethodName:                                       "/map.v1.Map/MapFn",
		mapv1.Map_IsReady_FullMethodName:                                     "/map.v1.Map/IsReady",
		reducev1.Reduce_ReduceFn_FullMethodName:                              "/reduce.v1.Reduce/ReduceFn",
		reducev1.Reduce_IsReady_FullMethodName:                               "/reduce.v1.Reduce/IsReady",
		sinkv1.Sink_SinkFn_FullMethodName:                                    "/sink.v1.Sink/SinkFn",
		sinkv1.Sink_IsReady_FullMethodName:                                   "/sink.v1.Sink/IsReady",
		sourcev1.Source_ReadFn_FullMethodName:                                "/source.v1.Source/ReadFn",
		sourcev1.Source_AckFn_FullMethodName:                                 "/source.v1.Source/AckFn",
		sourcev1.Source_NackFn_FullMethodName:                                "/source.v1.Source/NackFn",
		sourcev1.Source_PendingFn_FullMethodName:                             "/source.v1.Source/PendingFn",
		sourcev1.Source_PartitionsFn_FullMethodName:                          "/source.v1.Source/PartitionsFn",
		sourcev1.Source_IsReady_FullMethodName:                               "/source.v1.Source/IsReady",
		sourcetransformerv1.SourceTransform_SourceTransformFn_FullMethodName: "/sourcetransformer.v1.SourceTransform/SourceTransformFn",
		sourcetransformerv1.SourceTransform_IsReady_FullMethodName:           "/sourcetransformer.v1.SourceTransform/IsReady",
	}
	for got, want := range constants {
		if got != want {
			t.Errorf("method constant = %q, want %q", got, want)
		}
	}
}

// fieldSpec renders a field as "<number> <label> <type>", where label is
// "single" (proto3 implicit presence, or a plain message field), "optional"
// (declared with the optional keyword), "repeated" or "map", and type is the
// scalar kind or the full name of the message or enum (for maps: key,value).
func fieldSpec(fd protoreflect.FieldDescriptor) string {
	typeName := func(fd protoreflect.FieldDescriptor) string {
		switch fd.Kind() {
		case protoreflect.MessageKind, protoreflect.GroupKind:
			return string(fd.Message().FullName())
		case protoreflect.EnumKind:
			return string(fd.Enum().FullName())
		default:
			return fd.Kind().String()
		}
	}
	label := "single"
	typ := typeName(fd)
	switch {
	case fd.IsMap():
		label = "map"
		typ = typeName(fd.MapKey()) + "," + typeName(fd.MapValue())
	case fd.IsList():
		label = "repeated"
	case fd.HasOptionalKeyword():
		label = "optional"
	}
	return fmt.Sprintf("%d %s %s", fd.Number(), label, typ)
}

// wireLayout is the complete field layout of every message of the contract.
var wireLayout = map[protoreflect.ProtoMessage]map[string]string{
	// common
	&common.Metadata{}: {
		"previous_vertex": "1 single string",
		"sys_metadata":    "2 map string,common.KeyValueGroup",
		"user_metadata":   "3 map string,common.KeyValueGroup",
	},
	&common.KeyValueGroup{}: {
		"key_value": "1 map string,bytes",
	},
	&common.NackOptions{}: {
		"reason":         "1 optional string",
		"max_deliveries": "2 optional uint32",
		"delay":          "3 optional uint64",
		"nack_map":       "4 map string,string",
	},

	// map.v1
	&mapv1.MapRequest{}: {
		"request":   "1 single map.v1.MapRequest.Request",
		"id":        "2 single string",
		"handshake": "3 optional map.v1.Handshake",
		"status":    "4 optional map.v1.TransmissionStatus",
	},
	&mapv1.MapRequest_Request{}: {
		"keys":       "1 repeated string",
		"value":      "2 single bytes",
		"event_time": "3 single google.protobuf.Timestamp",
		"watermark":  "4 single google.protobuf.Timestamp",
		"headers":    "5 map string,string",
		"metadata":   "6 single common.Metadata",
	},
	&mapv1.MapResponse{}: {
		"results":   "1 repeated map.v1.MapResponse.Result",
		"id":        "2 single string",
		"handshake": "3 optional map.v1.Handshake",
		"status":    "4 optional map.v1.TransmissionStatus",
	},
	&mapv1.MapResponse_Result{}: {
		"keys":         "1 repeated string",
		"value":        "2 single bytes",
		"tags":         "3 repeated string",
		"metadata":     "4 single common.Metadata",
		"nack_options": "5 optional common.NackOptions",
	},
	&mapv1.Handshake{}:          {"sot": "1 single bool"},
	&mapv1.TransmissionStatus{}: {"eot": "1 single bool"},
	&mapv1.ReadyResponse{}:      {"ready": "1 single bool"},

	// reduce.v1
	&reducev1.ReduceRequest{}: {
		"payload":   "1 single reduce.v1.ReduceRequest.Payload",
		"operation": "2 single reduce.v1.ReduceRequest.WindowOperation",
	},
	&reducev1.ReduceRequest_WindowOperation{}: {
		"event":   "1 single reduce.v1.ReduceRequest.WindowOperation.Event",
		"windows": "2 repeated reduce.v1.Window",
	},
	&reducev1.ReduceRequest_Payload{}: {
		"keys":       "1 repeated string",
		"value":      "2 single bytes",
		"event_time": "3 single google.protobuf.Timestamp",
		"watermark":  "4 single google.protobuf.Timestamp",
		"headers":    "5 map string,string",
		"metadata":   "6 single common.Metadata",
	},
	&reducev1.Window{}: {
		"start": "1 single google.protobuf.Timestamp",
		"end":   "2 single google.protobuf.Timestamp",
		"slot":  "3 single string",
	},
	&reducev1.ReduceResponse{}: {
		"result": "1 single reduce.v1.ReduceResponse.Result",
		"window": "2 single reduce.v1.Window",
		"EOF":    "3 single bool",
	},
	&reducev1.ReduceResponse_Result{}: {
		"keys":     "1 repeated string",
		"value":    "2 single bytes",
		"tags":     "3 repeated string",
		"metadata": "4 single common.Metadata",
	},
	&reducev1.ReadyResponse{}: {"ready": "1 single bool"},

	// sink.v1
	&sinkv1.SinkRequest{}: {
		"request":   "1 single sink.v1.SinkRequest.Request",
		"status":    "2 single sink.v1.TransmissionStatus",
		"handshake": "3 optional sink.v1.Handshake",
	},
	&sinkv1.SinkRequest_Request{}: {
		"keys":       "1 repeated string",
		"value":      "2 single bytes",
		"event_time": "3 single google.protobuf.Timestamp",
		"watermark":  "4 single google.protobuf.Timestamp",
		"id":         "5 single string",
		"headers":    "6 map string,string",
		"metadata":   "7 single common.Metadata",
	},
	&sinkv1.SinkResponse{}: {
		"results":   "1 repeated sink.v1.SinkResponse.Result",
		"handshake": "2 optional sink.v1.Handshake",
		"status":    "3 optional sink.v1.TransmissionStatus",
	},
	&sinkv1.SinkResponse_Result{}: {
		"id":             "1 single string",
		"status":         "2 single sink.v1.Status",
		"err_msg":        "3 single string",
		"serve_response": "4 optional bytes",
		"on_success_msg": "5 optional sink.v1.SinkResponse.Result.Message",
		"nack_options":   "6 optional common.NackOptions",
	},
	&sinkv1.SinkResponse_Result_Message{}: {
		"value":    "1 single bytes",
		"keys":     "2 repeated string",
		"metadata": "3 single common.Metadata",
	},
	&sinkv1.Handshake{}:          {"sot": "1 single bool"},
	&sinkv1.TransmissionStatus{}: {"eot": "1 single bool"},
	&sinkv1.ReadyResponse{}:      {"ready": "1 single bool"},

	// source.v1
	&sourcev1.ReadRequest{}: {
		"request":   "1 single source.v1.ReadRequest.Request",
		"handshake": "2 optional source.v1.Handshake",
	},
	&sourcev1.ReadRequest_Request{}: {
		"num_records":   "1 single uint64",
		"timeout_in_ms": "2 single uint32",
	},
	&sourcev1.ReadResponse{}: {
		"result":    "1 single source.v1.ReadResponse.Result",
		"status":    "2 single source.v1.ReadResponse.Status",
		"handshake": "3 optional source.v1.Handshake",
	},
	&sourcev1.ReadResponse_Result{}: {
		"payload":    "1 single bytes",
		"offset":     "2 single source.v1.Offset",
		"event_time": "3 single google.protobuf.Timestamp",
		"keys":       "4 repeated string",
		"headers":    "5 map string,string",
		"metadata":   "6 single common.Metadata",
	},
	&sourcev1.ReadResponse_Status{}: {
		"eot":   "1 single bool",
		"code":  "2 single source.v1.ReadResponse.Status.Code",
		"error": "3 optional source.v1.ReadResponse.Status.Error",
		"msg":   "4 optional string",
	},
	&sourcev1.AckRequest{}: {
		"request":   "1 single source.v1.AckRequest.Request",
		"handshake": "2 optional source.v1.Handshake",
	},
	&sourcev1.AckRequest_Request{}: {
		"offsets": "1 repeated source.v1.Offset",
	},
	&sourcev1.AckResponse{}: {
		"result":    "1 single source.v1.AckResponse.Result",
		"handshake": "2 optional source.v1.Handshake",
	},
	&sourcev1.AckResponse_Result{}: {
		"success": "1 single google.protobuf.Empty",
	},
	&sourcev1.NackRequest{}: {
		"request": "1 repeated source.v1.NackRequest.Request",
	},
	&sourcev1.NackRequest_Request{}: {
		"offsets":      "1 repeated source.v1.Offset",
		"nack_options": "2 optional common.NackOptions",
	},
	&sourcev1.NackResponse{}: {
		"result": "1 single source.v1.NackResponse.Result",
	},
	&sourcev1.NackResponse_Result{}: {
		"success": "1 single google.protobuf.Empty",
	},
	&sourcev1.PendingResponse{}: {
		"result": "1 single source.v1.PendingResponse.Result",
	},
	&sourcev1.PendingResponse_Result{}: {
		"count": "1 single int64",
	},
	&sourcev1.PartitionsResponse{}: {
		"result": "1 single source.v1.PartitionsResponse.Result",
	},
	&sourcev1.PartitionsResponse_Result{}: {
		"partitions":       "1 repeated int32",
		"total_partitions": "2 optional int32",
	},
	&sourcev1.Offset{}: {
		"offset":       "1 single bytes",
		"partition_id": "2 single int32",
	},
	&sourcev1.Handshake{}:     {"sot": "1 single bool"},
	&sourcev1.ReadyResponse{}: {"ready": "1 single bool"},

	// sourcetransformer.v1
	&sourcetransformerv1.SourceTransformRequest{}: {
		"request":   "1 single sourcetransformer.v1.SourceTransformRequest.Request",
		"handshake": "2 optional sourcetransformer.v1.Handshake",
	},
	&sourcetransformerv1.SourceTransformRequest_Request{}: {
		"keys":       "1 repeated string",
		"value":      "2 single bytes",
		"event_time": "3 single google.protobuf.Timestamp",
		"watermark":  "4 single google.protobuf.Timestamp",
		"headers":    "5 map string,string",
		"id":         "6 single string",
		"metadata":   "7 single common.Metadata",
	},
	&sourcetransformerv1.SourceTransformResponse{}: {
		"results":   "1 repeated sourcetransformer.v1.SourceTransformResponse.Result",
		"id":        "2 single string",
		"handshake": "3 optional sourcetransformer.v1.Handshake",
	},
	&sourcetransformerv1.SourceTransformResponse_Result{}: {
		"keys":         "1 repeated string",
		"value":        "2 single bytes",
		"event_time":   "3 single google.protobuf.Timestamp",
		"tags":         "4 repeated string",
		"metadata":     "5 single common.Metadata",
		"nack_options": "6 optional common.NackOptions",
	},
	&sourcetransformerv1.Handshake{}:     {"sot": "1 single bool"},
	&sourcetransformerv1.ReadyResponse{}: {"ready": "1 single bool"},
}

func TestWireLayout(t *testing.T) {
	for msg, want := range wireLayout {
		md := msg.ProtoReflect().Descriptor()
		fields := md.Fields()
		got := make(map[string]string, fields.Len())
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			got[string(fd.Name())] = fieldSpec(fd)
		}
		for name, spec := range want {
			if got[name] != spec {
				t.Errorf("%s.%s = %q, want %q", md.FullName(), name, got[name], spec)
			}
		}
		for name, spec := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s has unexpected field %s (%s)", md.FullName(), name, spec)
			}
		}
	}
}

// TestFieldNumbers spells out a few numbers the stream framing relies on.
func TestFieldNumbers(t *testing.T) {
	number := func(m proto.Message, name string) protoreflect.FieldNumber {
		t.Helper()
		fd := m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			t.Fatalf("%T has no field %s", m, name)
		}
		return fd.Number()
	}
	cases := []struct {
		msg  proto.Message
		name string
		want protoreflect.FieldNumber
	}{
		{&mapv1.MapRequest{}, "id", 2},
		{&mapv1.MapRequest{}, "handshake", 3},
		{&mapv1.MapRequest{}, "status", 4},
		{&mapv1.MapResponse{}, "id", 2},
		{&sinkv1.SinkRequest{}, "status", 2},
		{&sinkv1.SinkRequest{}, "handshake", 3},
		{&sinkv1.SinkResponse{}, "handshake", 2},
		{&sinkv1.SinkResponse{}, "status", 3},
		{&sourcev1.ReadResponse{}, "status", 2},
		{&sourcev1.ReadResponse{}, "handshake", 3},
		{&sourcetransformerv1.SourceTransformRequest_Request{}, "id", 6},
	}
	for _, c := range cases {
		if got := number(c.msg, c.name); got != c.want {
			t.Errorf("%T.%s = %d, want %d", c.msg, c.name, got, c.want)
		}
	}
}

func TestEnumValues(t *testing.T) {
	cases := []struct {
		enum protoreflect.EnumDescriptor
		want string
	}{
		{reducev1.ReduceRequest_WindowOperation_Event(0).Descriptor(), "OPEN=0 CLOSE=1 APPEND=4"},
		{sinkv1.Status(0).Descriptor(), "SUCCESS=0 FAILURE=1 FALLBACK=2 SERVE=3 ON_SUCCESS=4 NACK=5"},
		{sourcev1.ReadResponse_Status_Code(0).Descriptor(), "SUCCESS=0 FAILURE=1"},
		{sourcev1.ReadResponse_Status_Error(0).Descriptor(), "UNACKED=0 OTHER=1"},
	}
	for _, c := range cases {
		var parts []string
		values := c.enum.Values()
		for i := 0; i < values.Len(); i++ {
			v := values.Get(i)
			parts = append(parts, fmt.Sprintf("%s=%d", v.Name(), v.Number()))
		}
		if got := strings.Join(parts, " "); got != c.want {
			t.Errorf("enum %s = %q, want %q", c.enum.FullName(), got, c.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	ts := timestamppb.New(time.Date(2024, 5, 6, 7, 8, 9, 10, time.UTC))
	wm := timestamppb.New(time.Date(2024, 5, 6, 7, 8, 0, 0, time.UTC))
	md := &common.Metadata{
		PreviousVertex: "in",
		SysMetadata:    map[string]*common.KeyValueGroup{"sys": {KeyValue: map[string][]byte{"k": []byte("v")}}},
		UserMetadata:   map[string]*common.KeyValueGroup{"user": {KeyValue: map[string][]byte{"a": {0, 1}}}},
	}
	nack := &common.NackOptions{
		Reason:        proto.String("poison"),
		MaxDeliveries: proto.Uint32(3),
		Delay:         proto.Uint64(1500),
		NackMap:       map[string]string{"retry": "later"},
	}
	offset := &sourcev1.Offset{Offset: []byte("42"), PartitionId: 7}

	msgs := []proto.Message{
		md,
		nack,
		&mapv1.MapRequest{
			Request: &mapv1.MapRequest_Request{
				Keys: []string{"k"}, Value: []byte("v"), EventTime: ts, Watermark: wm,
				Headers: map[string]string{"h": "1"}, Metadata: md,
			},
			Id:        "r-1",
			Handshake: &mapv1.Handshake{Sot: true},
			Status:    &mapv1.TransmissionStatus{Eot: true},
		},
		&mapv1.MapResponse{
			Results: []*mapv1.MapResponse_Result{
				{Keys: []string{"k"}, Value: []byte("out"), Tags: []string{"t"}, Metadata: md, NackOptions: nack},
				{Tags: []string{"U+005C__DROP__"}},
			},
			Id:     "r-1",
			Status: &mapv1.TransmissionStatus{Eot: true},
		},
		&mapv1.ReadyResponse{Ready: true},
		&reducev1.ReduceRequest{
			Payload: &reducev1.ReduceRequest_Payload{
				Keys: []string{"k"}, Value: []byte("v"), EventTime: ts, Watermark: wm,
				Headers: map[string]string{"h": "1"}, Metadata: md,
			},
			Operation: &reducev1.ReduceRequest_WindowOperation{
				Event:   reducev1.ReduceRequest_WindowOperation_APPEND,
				Windows: []*reducev1.Window{{Start: wm, End: ts, Slot: "slot-0"}},
			},
		},
		&reducev1.ReduceResponse{
			Result: &reducev1.ReduceResponse_Result{Keys: []string{"k"}, Value: []byte("3"), Tags: []string{"t"}, Metadata: md},
			Window: &reducev1.Window{Start: wm, End: ts, Slot: "slot-0"},
			EOF:    true,
		},
		&reducev1.ReadyResponse{Ready: true},
		&sinkv1.SinkRequest{
			Request: &sinkv1.SinkRequest_Request{
				Keys: []string{"k"}, Value: []byte("v"), EventTime: ts, Watermark: wm, Id: "s-1",
				Headers: map[string]string{"h": "1"}, Metadata: md,
			},
			Status:    &sinkv1.TransmissionStatus{Eot: false},
			Handshake: &sinkv1.Handshake{Sot: true},
		},
		&sinkv1.SinkResponse{
			Results: []*sinkv1.SinkResponse_Result{
				{Id: "s-1", Status: sinkv1.Status_SUCCESS},
				{Id: "s-2", Status: sinkv1.Status_FAILURE, ErrMsg: "boom"},
				{Id: "s-3", Status: sinkv1.Status_SERVE, ServeResponse: []byte("served")},
				{Id: "s-4", Status: sinkv1.Status_ON_SUCCESS, OnSuccessMsg: &sinkv1.SinkResponse_Result_Message{
					Value: []byte("ok"), Keys: []string{"k"}, Metadata: md,
				}},
				{Id: "s-5", Status: sinkv1.Status_NACK, NackOptions: nack},
			},
			Handshake: &sinkv1.Handshake{Sot: true},
			Status:    &sinkv1.TransmissionStatus{Eot: true},
		},
		&sinkv1.ReadyResponse{Ready: true},
		&sourcev1.ReadRequest{
			Request:   &sourcev1.ReadRequest_Request{NumRecords: 500, TimeoutInMs: 1000},
			Handshake: &sourcev1.Handshake{Sot: true},
		},
		&sourcev1.ReadResponse{
			Result: &sourcev1.ReadResponse_Result{
				Payload: []byte("p"), Offset: offset, EventTime: ts, Keys: []string{"k"},
				Headers: map[string]string{"h": "1"}, Metadata: md,
			},
			Status: &sourcev1.ReadResponse_Status{
				Eot:   true,
				Code:  sourcev1.ReadResponse_Status_FAILURE,
				Error: sourcev1.ReadResponse_Status_OTHER.Enum(),
				Msg:   proto.String("broken"),
			},
			Handshake: &sourcev1.Handshake{Sot: true},
		},
		&sourcev1.AckRequest{
			Request:   &sourcev1.AckRequest_Request{Offsets: []*sourcev1.Offset{offset}},
			Handshake: &sourcev1.Handshake{Sot: true},
		},
		&sourcev1.AckResponse{
			Result:    &sourcev1.AckResponse_Result{Success: &emptypb.Empty{}},
			Handshake: &sourcev1.Handshake{Sot: true},
		},
		&sourcev1.NackRequest{Request: []*sourcev1.NackRequest_Request{
			{Offsets: []*sourcev1.Offset{offset}, NackOptions: nack},
			{Offsets: []*sourcev1.Offset{{Offset: []byte("43")}}},
		}},
		&sourcev1.NackResponse{Result: &sourcev1.NackResponse_Result{Success: &emptypb.Empty{}}},
		&sourcev1.PendingResponse{Result: &sourcev1.PendingResponse_Result{Count: -1}},
		&sourcev1.PartitionsResponse{Result: &sourcev1.PartitionsResponse_Result{
			Partitions: []int32{0, 3}, TotalPartitions: proto.Int32(4),
		}},
		&sourcev1.ReadyResponse{Ready: true},
		&sourcetransformerv1.SourceTransformRequest{
			Request: &sourcetransformerv1.SourceTransformRequest_Request{
				Keys: []string{"k"}, Value: []byte("v"), EventTime: ts, Watermark: wm,
				Headers: map[string]string{"h": "1"}, Id: "t-1", Metadata: md,
			},
			Handshake: &sourcetransformerv1.Handshake{Sot: true},
		},
		&sourcetransformerv1.SourceTransformResponse{
			Results: []*sourcetransformerv1.SourceTransformResponse_Result{
				{Keys: []string{"k"}, Value: []byte("v"), EventTime: ts, Tags: []string{"t"}, Metadata: md, NackOptions: nack},
			},
			Id:        "t-1",
			Handshake: &sourcetransformerv1.Handshake{Sot: true},
		},
		&sourcetransformerv1.ReadyResponse{Ready: true},
	}
	for _, want := range msgs {
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatalf("marshal %T: %v", want, err)
		}
		got := want.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b, got); err != nil {
			t.Fatalf("unmarshal %T: %v", want, err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("%T did not survive a round trip:\n got %v\nwant %v", want, got, want)
		}
	}
}

// TestWireBytes pins the encoding of the framing messages byte for byte.
func TestWireBytes(t *testing.T) {
	cases := []struct {
		msg  proto.Message
		want []byte
	}{
		// id (field 2, bytes) "a"; handshake (field 3, message) {sot (field 1, varint) true}
		{&mapv1.MapRequest{Id: "a", Handshake: &mapv1.Handshake{Sot: true}}, []byte{0x12, 0x01, 'a', 0x1a, 0x02, 0x08, 0x01}},
		// status (field 4) {eot: true}
		{&mapv1.MapRequest{Status: &mapv1.TransmissionStatus{Eot: true}}, []byte{0x22, 0x02, 0x08, 0x01}},
		// an optional message field that is set but empty is still sent
		{&mapv1.MapResponse{Status: &mapv1.TransmissionStatus{}}, []byte{0x22, 0x00}},
		// reduce: operation (field 2) {event (field 1) APPEND (4)}; EOF is field 3
		{&reducev1.ReduceRequest{Operation: &reducev1.ReduceRequest_WindowOperation{Event: reducev1.ReduceRequest_WindowOperation_APPEND}}, []byte{0x12, 0x02, 0x08, 0x04}},
		{&reducev1.ReduceResponse{EOF: true}, []byte{0x18, 0x01}},
		// sink status is field 2, handshake field 3
		{&sinkv1.SinkRequest{Status: &sinkv1.TransmissionStatus{Eot: true}}, []byte{0x12, 0x02, 0x08, 0x01}},
		{&sinkv1.SinkRequest{Handshake: &sinkv1.Handshake{Sot: true}}, []byte{0x1a, 0x02, 0x08, 0x01}},
		// read request {num_records: 2, timeout_in_ms: 3}
		{&sourcev1.ReadRequest{Request: &sourcev1.ReadRequest_Request{NumRecords: 2, TimeoutInMs: 3}}, []byte{0x0a, 0x04, 0x08, 0x02, 0x10, 0x03}},
		// read handshake echo: status {eot:false, code:SUCCESS} (empty) + handshake {sot:true}
		{&sourcev1.ReadResponse{Status: &sourcev1.ReadResponse_Status{}, Handshake: &sourcev1.Handshake{Sot: true}}, []byte{0x12, 0x00, 0x1a, 0x02, 0x08, 0x01}},
	}
	for _, c := range cases {
		got, err := proto.MarshalOptions{Deterministic: true}.Marshal(c.msg)
		if err != nil {
			t.Fatalf("marshal %T: %v", c.msg, err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("%T %v encodes as % x, want % x", c.msg, c.msg, got, c.want)
		}
	}
}
