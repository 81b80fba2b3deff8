"""The knowledge graph side: Wikidata identifiers, prefixes and the label catalog."""
