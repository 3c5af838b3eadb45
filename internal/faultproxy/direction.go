package faultproxy

import "fmt"

// Direction says which way bytes travel through a [Proxy]: from the client
// that connected to the proxy towards the target server, from the server back
// to the client, or both ways. It is a bit set: Both is ToServer|ToClient.
//
// The zero value names no direction: a fault in it changes nothing and its
// counters read 0.
type Direction uint8

const (
	// ToServer is the way from the client to the target server: requests.
	ToServer Direction = 1 << iota
	// ToClient is the way from the target server back to the client: replies.
	ToClient
	// Both is ToServer and ToClient.
	Both = ToServer | ToClient
)

// directions lists the single directions in the order of Proxy.dirs.
var directions = [...]Direction{ToServer, ToClient}

// String returns toServer, toClient, both or none, or Direction(n) for a
// value with other bits set.
func (d Direction) String() string {
	switch d {
	case 0:
		return "none"
	case ToServer:
		return "toServer"
	case ToClient:
		return "toClient"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}
