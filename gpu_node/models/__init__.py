"""The model set of the GPU node: what turns page images into orientations, types
and text, each model loaded once per process (`ModelRegistry`).

The page model (`Classifier`: document type and orientation from one network), the
orientation model (`TextTiles`: tiles of print at reading resolution), the orienters
(`PageOrienter` asks a model, `Orienter` reads text lines), EasyOCR
(`OcrEngine`), the device choice, image decoding and the calibration measures that
training and evaluation share. Nothing here knows about Kafka.
"""

# Nothing is re-exported: importing one module of the package (ordering.py, say) must not
# load torch, EasyOCR and the rest, which `make check`'s collection would pay on every
# worker. Import from the modules themselves.
