package api

import "sync"

// ProxyBuffers is the httputil.BufferPool of boxd's reverse proxies (the
// data plane's and public URLs'): a proxied answer is copied through a
// kept buffer, not one made and cleared for each request.
var ProxyBuffers = &bufferPool{}

type bufferPool struct{ p sync.Pool }

// Get returns a 64 KiB buffer.
func (bp *bufferPool) Get() []byte {
	if b, ok := bp.p.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 64<<10)
}

// Put gives b back.
func (bp *bufferPool) Put(b []byte) { bp.p.Put(&b) }
