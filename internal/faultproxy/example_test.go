package faultproxy_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/sluiceflow/sluice/internal/faultproxy"
)

// Example puts a proxy between a client and an echo server, delays the bytes
// both ways, then cuts the connection.
func Example() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	defer func() { <-served }()

	p, err := faultproxy.Start(ln.Addr().String())
	if err != nil {
		panic(err)
	}
	defer p.Close()

	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 5)

	_, _ = c.Write([]byte("hello"))
	_, _ = io.ReadFull(c, buf)
	fmt.Printf("forwarded: %s\n", buf)

	p.Delay(faultproxy.Both, 50*time.Millisecond)
	start := time.Now()
	_, _ = c.Write([]byte("again"))
	_, _ = io.ReadFull(c, buf)
	fmt.Printf("delayed: %s, round trip of 100ms or more: %t\n", buf, time.Since(start) >= 100*time.Millisecond)

	p.Cut()
	_, err = c.Read(buf)
	fmt.Println("after cut, reset:", errors.Is(err, syscall.ECONNRESET))
	// Output:
	// forwarded: hello
	// delayed: again, round trip of 100ms or more: true
	// after cut, reset: true
}
