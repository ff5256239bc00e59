// Package testnet holds the tests' loopback network helpers.
package testnet

import (
	"net"
	"testing"
)

// ClosedAddr is a loopback address (host:port) whose port was free a
// moment ago: nothing listens there unless something took it since.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
