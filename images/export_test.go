package images

// AfterBase has a build call fn with its image tree and its base's
// directory as soon as the base is in place, before anything else
// changes the tree.
func AfterBase(o *BuildOptions, fn func(root, baseDir string) error) { o.afterBase = fn }

// TreeListing lists a tree as a base's listing does.
var TreeListing = treeListing

// BaseListing is the file of a base's directory that lists debootstrap's
// tree as it was kept.
const BaseListing = baseListing
