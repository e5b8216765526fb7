// Package proxybuf holds the copy buffers of boxd's reverse proxies: the
// data plane's, public URLs' and the egress proxy's copy each answer
// through a kept buffer, not one made and cleared for each request.
package proxybuf

import (
	"net/http/httputil"
	"sync"
)

// Pool is the httputil.BufferPool of boxd's reverse proxies. Its buffers
// are 64 KiB.
var Pool httputil.BufferPool = &pool{}

type pool struct{ p sync.Pool }

func (bp *pool) Get() []byte {
	if b, ok := bp.p.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 64<<10)
}

func (bp *pool) Put(b []byte) { bp.p.Put(&b) }
