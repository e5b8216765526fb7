//go:build linux

// Examples run against an embedded boxd, which runs boxes only on Linux;
// an Example cannot skip, so elsewhere this file is left out.

package box_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"

	"github.com/upstash/box-go/box"
)

func ExampleBox_GetPublicURL() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	b, err := client.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Delete(ctx)

	// A web server in the box, on the box's own loopback. It may not
	// listen yet when the request below arrives: a public URL request
	// waits up to 30 seconds for its port.
	_, err = b.Exec.Command(ctx, `mkdir -p /tmp/site && echo hello from the box > /tmp/site/index.html
(cd /tmp/site && nohup python3 -m http.server 3000 --bind 127.0.0.1 >/dev/null 2>&1 &)`)
	if err != nil {
		log.Fatal(err)
	}
	u, err := b.GetPublicURL(ctx, 3000, &box.PublicURLParams{BearerToken: true})
	if err != nil {
		log.Fatal(err)
	}

	// On boxd, u.URL is http://{box-id}-3000.localhost:{port}.
	// Browsers and curl resolve *.localhost to the loopback address; Go's
	// resolver does not, so this client dials it itself.
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, _ := net.SplitHostPort(addr)
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
	}}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.URL, nil)
	req.Header.Set("Authorization", "Bearer "+u.Token)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(string(body))
	// Output: hello from the box
}

func ExampleBox_ListPublicURLs() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	b, err := client.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Delete(ctx)

	// Either credential passes a URL that has both.
	if _, err := b.GetPublicURL(ctx, 3000, &box.PublicURLParams{BearerToken: true, BasicAuth: true}); err != nil {
		log.Fatal(err)
	}
	if _, err := b.GetPublicURL(ctx, 8080, nil); err != nil {
		log.Fatal(err)
	}
	// The list tells which kinds of auth each URL has, never the
	// credentials: GetPublicURL returned them, once.
	urls, err := b.ListPublicURLs(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, u := range urls {
		fmt.Println(u.ID == fmt.Sprintf("%s-%d", b.ID(), u.Port), u.Port, u.BearerToken, u.BasicAuth)
	}
	// Output:
	// true 3000 true true
	// true 8080 false false
}

func ExampleBox_UpdateNetworkPolicy() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	b, err := client.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Delete(ctx)

	if err := b.UpdateNetworkPolicy(ctx, box.NetworkPolicy{Mode: box.NetworkDenyAll}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(b.NetworkPolicy().Mode)
	// The box's programs reach the network through boxd's proxy, which
	// now refuses everything.
	run, err := b.Exec.Command(ctx, "curl -s -o /dev/null -w '%{http_code}' http://example.com/")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.Stdout)
	// Output:
	// deny-all
	// 403
}
