// Command netserver is a small HTTP server that the networking tests and
// benchmarks run inside boxes (and on the host, for comparison):
//
//	GET /id          the box id ($BOX_ID) and a newline
//	GET /bytes?n=N   N bytes (keep-alive, Content-Length set)
//	GET /ws          a WebSocket that echoes every message back
//
// It uses only the standard library (the WebSocket side implements just
// what the echo needs of RFC 6455), so it builds with CGO_ENABLED=0 and
// runs in any box.
package main

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:3000", "listen address")
	flag.Parse()
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte('a' + i%26)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /id", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, os.Getenv("BOX_ID"))
	})
	mux.HandleFunc("GET /bytes", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		for n > 0 {
			k := min(n, int64(len(block)))
			if _, err := w.Write(block[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("GET /ws", echoWS)
	log.Fatal(http.ListenAndServe(*addr, mux))
}

func echoWS(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Sec-WebSocket-Key")
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || key == "" {
		http.Error(w, "not a websocket handshake", http.StatusBadRequest)
		return
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	conn, brw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", base64.StdEncoding.EncodeToString(sum[:]))
	if brw.Flush() != nil {
		return
	}
	for {
		op, payload, err := readFrame(brw.Reader)
		if err != nil {
			return
		}
		if op == 8 { // close: answer it and stop
			writeFrame(conn, 8, payload)
			return
		}
		if op == 1 || op == 2 {
			if writeFrame(conn, op, payload) != nil {
				return
			}
		}
	}
}

// readFrame reads one unfragmented client frame (masked, as clients must).
func readFrame(r *bufio.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	op, masked, n := h[0]&0x0f, h[1]&0x80 != 0, uint64(h[1]&0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 16<<20 {
		return 0, nil, fmt.Errorf("frame of %d bytes", n)
	}
	var mask [4]byte
	if masked {
		if _, err := io.ReadFull(r, mask[:]); err != nil {
			return 0, nil, err
		}
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	if masked {
		for i := range p {
			p[i] ^= mask[i%4]
		}
	}
	return op, p, nil
}

// writeFrame writes one unmasked server frame.
func writeFrame(w io.Writer, op byte, p []byte) error {
	h := []byte{0x80 | op}
	switch {
	case len(p) < 126:
		h = append(h, byte(len(p)))
	case len(p) < 1<<16:
		h = append(h, 126, byte(len(p)>>8), byte(len(p)))
	default:
		h = append(h, 127)
		h = binary.BigEndian.AppendUint64(h, uint64(len(p)))
	}
	_, err := w.Write(append(h, p...))
	return err
}
