package box

// Labels manages a box's labels.
type Labels struct{ b *Box }

// Skills manages the agent skills enabled in a box.
type Skills struct{ b *Box }
