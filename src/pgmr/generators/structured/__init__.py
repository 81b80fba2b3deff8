"""The structured (structure-first) generator: a query template plus slot values, read off one encoder pass.

Modules: `frames` (templates, literal marks, spans), `targets` (training targets and the label spaces),
`model` (the network), `decoding` (tensors in, frames and SPARQL-PGMR out), `train` (the resumable loop),
`store` (model directories, int8 packing), `generator` (the `Generator` seam).
"""
