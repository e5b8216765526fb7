package session

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBase64MatchesStdlib(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 300 {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		want := base64.StdEncoding.EncodeToString(src)
		got := appendBase64([]byte("prefix"), src)
		if string(got) != "prefix"+want {
			t.Fatalf("encode(%d bytes) = %q, want %q", n, got[6:], want)
		}
		dec, err := decodeBase64(nil, []byte(want))
		if err != nil || !bytes.Equal(dec, src) {
			t.Fatalf("decode(%d bytes) = %x, %v", n, dec, err)
		}
	}
	// Mangled input: whatever encoding/base64 says, decodeBase64 says.
	for range 20000 {
		src := make([]byte, r.IntN(64))
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		enc := []byte(base64.StdEncoding.EncodeToString(src))
		for range r.IntN(3) {
			if len(enc) > 0 {
				enc[r.IntN(len(enc))] = "=\n\r!A+/"[r.IntN(7)]
			}
		}
		want := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
		n, werr := base64.StdEncoding.Decode(want, enc)
		got, err := decodeBase64(nil, enc)
		if (err != nil) != (werr != nil) || (err == nil && !bytes.Equal(got, want[:n])) {
			t.Fatalf("decode(%q) = %x, %v; encoding/base64: %x, %v", enc, got, err, want[:n], werr)
		}
	}
	for _, bad := range []string{"A", "AB=C", "ABCD!EFGHIJKLMNO", "ABCDEFGH====", "ABCDEFGHIJKLMNOPQRS"} {
		if _, err := decodeBase64(nil, []byte(bad)); err == nil {
			t.Errorf("decode(%q) accepted", bad)
		}
	}
	// Line breaks are ignored, as by StdEncoding.Decode.
	if dec, err := decodeBase64(make([]byte, 0, 100), []byte("aGVsbG8g\r\nd29ybGQh")); err != nil || string(dec) != "hello world!" {
		t.Errorf("decode with a line break = %q, %v", dec, err)
	}
}

func FuzzBase64(f *testing.F) {
	f.Add([]byte("hello, world"), []byte("aGVsbG8="))
	f.Fuzz(func(t *testing.T, src, enc []byte) {
		if got, want := appendBase64(nil, src), base64.StdEncoding.EncodeToString(src); string(got) != want {
			t.Fatalf("encode(%x) = %q, want %q", src, got, want)
		}
		want := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
		n, werr := base64.StdEncoding.Decode(want, enc)
		got, err := decodeBase64(nil, enc)
		if (err != nil) != (werr != nil) || (err == nil && !bytes.Equal(got, want[:n])) {
			t.Fatalf("decode(%q) = %x, %v; stdlib %x, %v", enc, got, err, want[:n], werr)
		}
	})
}

func TestFrameCodec(t *testing.T) {
	code := 0
	grace := int64(1500)
	for _, f := range []*Frame{
		{Type: TypeStdout, Data: []byte("hello\x00\xff")},
		{Type: TypeStderr, Data: bytes.Repeat([]byte{7}, 10_000)},
		{Type: TypeStdin, Data: []byte("x")},
		{Type: TypeStart, Argv: []string{"a", "b c"}, Cwd: "/w", Env: []string{"A=1"}, TTY: true, Rows: 2, Cols: 3},
		{Type: TypeExit, Code: &code},
		{Type: TypeTerminate, GraceMs: &grace},
		{Type: TypeStarted, PID: 5, ExecID: "exec-1"},
		{Type: TypeError, Message: `bad "thing"`},
		{Type: TypeStdinClose},
	} {
		msg, err := encode(f)
		if err != nil {
			t.Fatal(err)
		}
		// What encoding/json makes of the message is what was meant.
		var viaJSON Frame
		if err := json.Unmarshal(msg, &viaJSON); err != nil {
			t.Fatalf("%s: %v", msg, err)
		}
		if diff := cmp.Diff(f, &viaJSON); diff != "" {
			t.Errorf("encode(%s) read by encoding/json (-want +got):\n%s", f.Type, diff)
		}
		got, err := decode(msg)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(f, got); diff != "" {
			t.Errorf("decode(encode(%s)) (-want +got):\n%s", f.Type, diff)
		}
	}

	// Exact wire text of the frames whose shape matters.
	for f, want := range map[*Frame]string{
		{Type: TypeExit, Code: &code}:               `{"type":"exit","code":0}`,
		{Type: TypeStdout, Data: []byte("hi")}:      `{"type":"stdout","data":"aGk="}`,
		{Type: TypeStart, Cmd: "ls", Cwd: "/w"}:     `{"type":"start","cmd":"ls","cwd":"/w"}`,
		{Type: TypeTerminate, GraceMs: new(int64)}:  `{"type":"terminate","graceMs":0}`,
		{Type: TypeSignal, Signal: "INT"}:           `{"type":"signal","signal":"INT"}`,
		{Type: TypeResize, Rows: 24, Cols: 80}:      `{"type":"resize","rows":24,"cols":80}`,
		{Type: TypeStarted, PID: 9, ExecID: "e"}:    `{"type":"started","pid":9,"execId":"e"}`,
		{Type: TypeStdinClose}:                      `{"type":"stdin_close"}`,
		{Type: TypeError, Message: "no"}:            `{"type":"error","message":"no"}`,
		{Type: TypeStdin, Data: []byte{0xfb, 0xff}}: `{"type":"stdin","data":"+/8="}`,
	} {
		msg, _ := encode(f)
		if string(msg) != want {
			t.Errorf("encode(%+v) = %s, want %s", f, msg, want)
		}
	}

	for _, tc := range []struct {
		msg  string
		want *Frame
	}{
		{`{ "type" : "stdout", "data" : "aGk=" }`, &Frame{Type: TypeStdout, Data: []byte("hi")}},
		{`{"type":"stdout","data":"aG\u0039="}`, &Frame{Type: TypeStdout, Data: []byte("ho")}},
		{`{"type":"stdout","data":""}`, &Frame{Type: TypeStdout}},
		{`{"type":"future","data":5,"pid":"x"}`, &Frame{Type: "future"}},
		{`{"type":"exit","code":130,"extra":[1]}`, &Frame{Type: TypeExit, Code: ptr(130)}},
	} {
		got, err := decode([]byte(tc.msg))
		if err != nil {
			t.Errorf("decode(%s): %v", tc.msg, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("decode(%s) (-want +got):\n%s", tc.msg, diff)
		}
	}
	for _, bad := range []string{``, `null`, `[]`, `"stdout"`, `{}`, `{"type":5}`, `{"type":"exit","code":"x"}`, `{"type":"stdout","data":"!!"}`} {
		if f, err := decode([]byte(bad)); !errors.Is(err, errBadFrame) {
			t.Errorf("decode(%s) = %+v, %v; want errBadFrame", bad, f, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }
