package session

import (
	"encoding/base64"
	"encoding/binary"
)

// Data frames are base64 (standard alphabet, padded), and at full speed a
// session spends most of its CPU time encoding and decoding it. These two
// functions produce exactly what encoding/base64's StdEncoding does, but
// handle 6 bytes (8 characters) per step with word stores and tables (12
// bits to two characters; a character to its bits, pre-shifted for its
// place in a group); the last few bytes go through encoding/base64.
//
// They are marked //go:norace: they touch only the two slices they are
// given, and under the race detector the per-byte instrumentation made
// them (as encoding/base64) an order of magnitude slower, which made
// large transfers in -race tests take tens of seconds.

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

var (
	// enc12 maps 12 bits to their two characters, the first in the high
	// byte.
	enc12 [4096]uint16
	// dec24[k][c] is the 6 bits of character c at position k of a
	// 4-character group, shifted into place in 24 bits; 0xffffffff when c
	// is not in the alphabet.
	dec24 [4][256]uint32
)

func init() {
	for i := range enc12 {
		enc12[i] = uint16(alphabet[i>>6])<<8 | uint16(alphabet[i&63])
	}
	for k := range dec24 {
		for c := range dec24[k] {
			dec24[k][c] = 0xffffffff
		}
		for i := range len(alphabet) {
			dec24[k][alphabet[i]] = uint32(i) << (18 - 6*k)
		}
	}
}

// appendBase64 appends the base64 of src to dst.
func appendBase64(dst, src []byte) []byte {
	n := base64.StdEncoding.EncodedLen(len(src))
	if cap(dst)-len(dst) < n {
		grown := make([]byte, len(dst), len(dst)+n)
		copy(grown, dst)
		dst = grown
	}
	out := dst[len(dst) : len(dst)+n]
	i, j := encodeWords(out, src)
	base64.StdEncoding.Encode(out[j:], src[i:])
	return dst[:len(dst)+n]
}

// encodeWords encodes the leading 6-byte groups of src into dst while 8
// bytes can be loaded, and returns how far it got in each.
//
//go:norace
func encodeWords(dst, src []byte) (i, j int) {
	for len(src)-i >= 8 && len(dst)-j >= 8 {
		v := binary.BigEndian.Uint64(src[i:])
		w := uint64(enc12[v>>52])<<48 |
			uint64(enc12[v>>40&0xfff])<<32 |
			uint64(enc12[v>>28&0xfff])<<16 |
			uint64(enc12[v>>16&0xfff])
		binary.BigEndian.PutUint64(dst[j:], w)
		i += 6
		j += 8
	}
	return i, j
}

// decodeBase64 decodes src into dst when its capacity is at least
// DecodedLen(len(src)), else into a new slice, and returns the decoded
// bytes. Like StdEncoding.Decode it ignores \r and \n and
// requires padding.
func decodeBase64(dst, src []byte) ([]byte, error) {
	if n := base64.StdEncoding.DecodedLen(len(src)); cap(dst) < n {
		dst = make([]byte, n)
	} else {
		dst = dst[:n]
	}
	i, j := decodeWords(dst, src)
	n, err := base64.StdEncoding.Decode(dst[j:], src[i:])
	if err != nil {
		return nil, err
	}
	return dst[:j+n], nil
}

// decodeWords decodes leading groups of 8 characters of src into dst
// while they are all in the alphabet and 8 bytes can be stored, and
// returns how far it got in each. It stops at padding, line breaks or
// anything else, which the caller leaves to encoding/base64.
//
//go:norace
func decodeWords(dst, src []byte) (i, j int) {
	for len(src)-i >= 8 && len(dst)-j >= 8 {
		s := src[i : i+8 : i+8]
		x := dec24[0][s[0]] | dec24[1][s[1]] | dec24[2][s[2]] | dec24[3][s[3]]
		y := dec24[0][s[4]] | dec24[1][s[5]] | dec24[2][s[6]] | dec24[3][s[7]]
		if (x|y)&0xff000000 != 0 {
			break
		}
		binary.BigEndian.PutUint64(dst[j:], uint64(x)<<40|uint64(y)<<16)
		i += 8
		j += 6
	}
	return i, j
}
