package box

// Git runs git in a box. Every call except Clone runs in the box's tracked
// working directory.
type Git struct{ b *Box }
