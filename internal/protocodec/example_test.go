package protocodec_test

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/internal/protocodec"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
)

// The codec's encoding is proto.Marshal's; gRPC calls it once a connection
// or a server is given the codec (grpc.ForceCodecV2, grpc.ForceServerCodecV2).
func Example() {
	m := &mapv1.MapRequest{Id: "1-0", Request: &mapv1.MapRequest_Request{Value: []byte("hello")}}
	data, err := protocodec.Codec{}.Marshal(m)
	if err != nil {
		panic(err)
	}
	defer data.Free()
	std, _ := proto.Marshal(m)
	fmt.Println(data.Len(), bytes.Equal(data.Materialize(), std))
	// Output: 14 true
}
