// Command boxd is a local backend for the Upstash Box API: it runs real
// sandboxes (bubblewrap) on this machine, so that the Box SDKs, their
// examples and tests work with no cloud account and no network.
//
// Usage:
//
//	boxd [-addr 127.0.0.1:8989] [-data DIR] [-api-key-file FILE] [-isolation bwrap|none]
//	     [-allow-host-loopback] [-github-url https://github.com] [-github-api-url URL]
//	     [-ssh-addr 127.0.0.1:2222] [-ssh-authorized-keys FILE]
//
// The API key comes from the file given with -api-key-file, else from
// $UPSTASH_BOX_API_KEY; without either boxd makes one and prints it.
// -api-key KEY works too, but puts the key where every user of the
// machine sees it (ps), and boxd says so.
//
// Point an SDK at it with UPSTASH_BOX_BASE_URL=http://127.0.0.1:8989 and
// UPSTASH_BOX_API_KEY set to the same key.
package main

import (
	"os"

	"github.com/upstash/box-go/cmd/internal/boxdcli"
)

func main() {
	os.Exit(boxdcli.Main("boxd", os.Args[1:], os.Stdout, os.Stderr))
}
